/**
 * Resumable uploads over HTTP through `{base_url}` (docs/storage.md "Resumable uploads"), on both
 * backends (`s3` against s3rver): tus-js-client uploading 100 MiB in 8 MiB chunks through a proxy
 * that cuts the connection in the middle, then resuming; the limits (a chunk over one request's,
 * a total over the largest object); termination; expiry with its bytes removed; and kill -9 of the
 * agent at random points of an upload, which always leaves a resumable upload or a stored object.
 */
import { createHash, randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import * as tus from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { createClient } from '../../client/index.ts';
import { REPO, tempDir } from '../helpers/env.ts';
import { startSuiteStack } from '../helpers/stack.ts';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { S3_TEST_BUCKET, S3RVER_CREDENTIALS, s3TestSettings } from '../setup/s3rver.ts';

const MiB = 1024 * 1024;
const MAX_OBJECT = 200 * MiB;
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const meta = (m: Record<string, string>) =>
  Object.entries(m)
    .map(([k, v]) => `${k} ${Buffer.from(v).toString('base64')}`)
    .join(',');

/** A TCP proxy to `target` that can cut every connection once `cutAfter` client bytes have passed. */
function cuttingProxy(target: URL, cutAfter: number): Promise<{ url: string; cuts: () => number; close(): void }> {
  let passed = 0;
  let cuts = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    client.on('data', (d: Buffer) => {
      passed += d.byteLength;
      if (cuts === 0 && passed >= cutAfter) {
        cuts++;
        for (const s of sockets) s.destroy();
        return;
      }
      if (!upstream.write(d)) client.pause();
    });
    upstream.on('drain', () => client.resume());
    upstream.pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      resolve({ url: `http://127.0.0.1:${port}`, cuts: () => cuts, close: () => server.close() });
    }),
  );
}

/** One tus-js-client upload to its end or its first error (no automatic retry). */
function tusUpload(data: Buffer, options: tus.UploadOptions): Promise<{ url: string | null; error: Error | null; firstOffset: number | null }> {
  return new Promise((resolve) => {
    let firstOffset: number | null = null;
    const upload = new tus.Upload(data, {
      chunkSize: 8 * MiB,
      retryDelays: null,
      ...options,
      onProgress: (sent) => (firstOffset ??= sent),
      onSuccess: () => resolve({ url: upload.url, error: null, firstOffset }),
      onError: (error) => resolve({ url: upload.url, error, firstOffset }),
    });
    upload.start();
  });
}

/** Sends a request with `headers` and a body of `bytes` zeros (or none); answers status and headers. */
function raw(url: string, method: string, headers: Record<string, string>, bytes = 0): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers }));
    });
    req.on('error', reject);
    if (bytes > 0) req.write(Buffer.alloc(bytes));
    req.end();
  });
}

function filesUnder(root: string): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

describe.each(['fs', 's3'] as const)('resumable uploads on the %s backend', (backend) => {
  let stack: Stack;
  let dir: ReturnType<typeof tempDir>;
  let auth: Record<string, string>;
  let storage: string;
  let endpoint: string;
  let projectId: string;

  beforeAll(async () => {
    dir = tempDir(`svc-resumable-${backend}-`);
    stack = await startSuiteStack(dir.dir, {
      SVCD_STORAGE_MAX_OBJECT_BYTES: String(MAX_OBJECT),
      SVCD_RESUMABLE_EXPIRY_SECONDS: '600',
      ...(backend === 's3' ? s3TestSettings(inject('s3Endpoint')) : {}),
    });
    const post = async (path: string, body: unknown, headers: Record<string, string> = {}) =>
      (await (await fetch(`${stack.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })).json()) as Record<string, string>;
    const { token } = await post('/v0/signup', {});
    auth = { authorization: `Bearer ${token}` };
    const { id } = await post('/v0/projects', { name: 'resumable' }, auth);
    projectId = id!;
    storage = `${stack.url}/v0/projects/${id}/storage`;
    endpoint = `${storage}/resumable`;
    expect((await fetch(`${storage}/buckets/big`, { method: 'PUT', headers: auth })).status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
    dir?.cleanup();
  });

  const uploadsDir = () => join(stack.agents[0]!.root, 'blobs', '.uploads');
  const object = async (key: string) => {
    const res = await fetch(`${storage}/objects/big/${key}`, { headers: auth });
    return { status: res.status, etag: res.headers.get('etag'), body: Buffer.from(await res.arrayBuffer()) };
  };

  it('tus-js-client: 100 MiB in 8 MiB chunks, the connection cut in the middle, then resumed', async () => {
    const data = randomBytes(100 * MiB);
    const proxy = await cuttingProxy(new URL(stack.url), 52 * MiB);
    try {
      const via = endpoint.replace(stack.url, proxy.url);
      const metadata = { bucket: 'big', key: 'films/big.bin', content_type: 'video/mp4' };
      const first = await tusUpload(data, { endpoint: via, headers: { ...auth }, metadata });
      expect(proxy.cuts()).toBe(1);
      expect(first.error).not.toBeNull();
      expect(first.url).toMatch(/\/storage\/resumable\/upl_[0-9a-f]{16}$/);
      const head = await fetch(first.url!.replace(proxy.url, stack.url), { method: 'HEAD', headers: { ...auth, 'tus-resumable': '1.0.0' } });
      const offset = Number(head.headers.get('upload-offset'));
      expect(offset % (8 * MiB)).toBe(0);
      expect(offset).toBeGreaterThan(0);
      // Resumed from where the service says it stands, by a new client given the upload's URL.
      // It retries as tus-js-client does by default: a 409 while the agent still lets go of the cut
      // request's write (the cut reaches it through the origin and the handlers) is tried again.
      const second = await tusUpload(data, { uploadUrl: first.url!, headers: { ...auth }, metadata, retryDelays: [0, 500, 1000, 2000, 4000] });
      expect(second.error).toBeNull();
      expect(second.firstOffset).toBeGreaterThanOrEqual(offset);
    } finally {
      proxy.close();
    }
    const got = await object('films/big.bin');
    expect(got.status).toBe(200);
    expect(got.body.byteLength).toBe(data.byteLength);
    expect(sha256(got.body)).toBe(sha256(data));
    if (backend === 'fs') expect(got.etag).toBe(`"${sha256(data)}"`);
    const list = (await (await fetch(`${storage}/objects?bucket=big`, { headers: auth })).json()) as { objects: { key: string; state: string; size: number }[] };
    expect(list.objects).toEqual([expect.objectContaining({ key: 'films/big.bin', state: 'stored', size: 100 * MiB, content_type: 'video/mp4' })]);
    const receipts = (await (await fetch(`${storage.replace('/storage', '')}/receipts`, { headers: auth })).json()) as { receipts: { op: string; target: string }[] };
    expect(receipts.receipts.filter((r) => r.op === 'object.put' && r.target === 'big/films/big.bin')).toHaveLength(1);
    if (backend === 'fs') expect(filesUnder(uploadsDir())).toEqual([]);
  }, 300_000);

  it('refuses a chunk over one request\'s limit and a total over the largest object, with 413', async () => {
    const tusAuth = { ...auth, 'tus-resumable': '1.0.0' };
    const over = await raw(endpoint, 'POST', { ...tusAuth, 'upload-length': String(MAX_OBJECT + 1), 'upload-metadata': meta({ bucket: 'big', key: 'x' }) });
    expect(over.status).toBe(413);
    const created = await raw(endpoint, 'POST', { ...tusAuth, 'upload-length': String(64 * MiB), 'upload-metadata': meta({ bucket: 'big', key: 'limits' }) });
    expect(created.status).toBe(201);
    expect(created.headers['tus-resumable']).toBe('1.0.0');
    const url = `${stack.url}${created.headers.location}`;
    // Declared over 32 MiB: refused before a byte is read (the body is drained while answered).
    const chunk = await raw(url, 'PATCH', { ...tusAuth, 'upload-offset': '0', 'content-type': 'application/offset+octet-stream', 'content-length': String(33 * MiB) }, 33 * MiB);
    expect(chunk.status).toBe(413);
    const wrongOffset = await raw(url, 'PATCH', { ...tusAuth, 'upload-offset': '5', 'content-type': 'application/offset+octet-stream', 'content-length': '1' }, 1);
    expect(wrongOffset.status).toBe(409);
    const noVersion = await raw(url, 'HEAD', auth);
    expect(noVersion.status).toBe(400);
    // A browser's preflight and answer (the stack allows every origin): the TUS headers go both ways.
    const preflight = await raw(url, 'OPTIONS', { origin: 'http://page.test', 'access-control-request-method': 'PATCH', 'access-control-request-headers': 'authorization,tus-resumable,upload-offset,content-type' });
    expect(preflight.status).toBe(204);
    expect(String(preflight.headers['access-control-allow-headers'])).toMatch(/Tus-Resumable.*Upload-Length.*Upload-Offset.*Upload-Metadata/);
    const seen = await raw(endpoint, 'POST', { ...tusAuth, origin: 'http://page.test', 'upload-length': '1', 'upload-metadata': meta({ bucket: 'big', key: 'cors' }) });
    expect(String(seen.headers['access-control-expose-headers'])).toMatch(/Location.*Tus-Resumable.*Upload-Offset/);
    const options = await raw(endpoint, 'OPTIONS', {});
    expect(options.status).toBe(204);
    expect(options.headers['tus-extension']).toBe('creation,creation-with-upload,termination,expiration');
    expect(options.headers['tus-max-size']).toBe(String(MAX_OBJECT));
    // Termination: the bytes go, the upload is 404 after.
    const some = await raw(url, 'PATCH', { ...tusAuth, 'upload-offset': '0', 'content-type': 'application/offset+octet-stream', 'content-length': String(MiB) }, MiB);
    expect(some.status).toBe(204);
    expect(some.headers['upload-offset']).toBe(String(MiB));
    expect((await raw(url, 'DELETE', tusAuth)).status).toBe(204);
    expect((await raw(url, 'HEAD', tusAuth)).status).toBe(404);
    if (backend === 'fs') expect(filesUnder(uploadsDir())).toEqual([]);
    expect((await object('limits')).status).toBe(404);
  }, 60_000);

  it('creation with upload, and a 0-byte upload, each become an object', async () => {
    const tusAuth = { ...auth, 'tus-resumable': '1.0.0' };
    const small = await raw(endpoint, 'POST', { ...tusAuth, 'upload-length': '3', 'upload-metadata': meta({ bucket: 'big', filename: 'abc.txt', filetype: 'text/plain' }), 'content-type': 'application/offset+octet-stream', 'content-length': '3' }, 3);
    expect(small.status).toBe(201);
    expect(small.headers['upload-offset']).toBe('3');
    const got = await object('abc.txt');
    expect(got.status).toBe(200);
    expect(got.body).toEqual(Buffer.alloc(3));
    const empty = await raw(endpoint, 'POST', { ...tusAuth, 'upload-length': '0', 'upload-metadata': meta({ bucket: 'big', key: 'empty' }) });
    expect(empty.status).toBe(201);
    expect((await object('empty')).body.byteLength).toBe(0);
    // A finished upload still answers where it stands.
    const head = await raw(`${stack.url}${small.headers.location}`, 'HEAD', tusAuth);
    expect(head.status).toBe(200);
    expect(head.headers['upload-offset']).toBe('3');
  }, 60_000);

  it('PATCHes under 5 MiB are gathered into parts (s3\'s incomplete part), and the object has every byte', async () => {
    const tusAuth = { ...auth, 'tus-resumable': '1.0.0' };
    const data = randomBytes(12 * MiB);
    const created = await raw(endpoint, 'POST', { ...tusAuth, 'upload-length': String(data.byteLength), 'upload-metadata': meta({ bucket: 'big', key: 'small-chunks' }) });
    const url = `${stack.url}${created.headers.location}`;
    for (let offset = 0; offset < data.byteLength; offset += 3 * MiB) {
      const res = await fetch(url, { method: 'PATCH', headers: { ...tusAuth, 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream' }, body: data.subarray(offset, offset + 3 * MiB) });
      expect(res.status).toBe(204);
    }
    expect(sha256((await object('small-chunks')).body)).toBe(sha256(data));
  }, 60_000);

  it('another account, and no credential, get 404 and 401', async () => {
    const created = await raw(endpoint, 'POST', { ...auth, 'tus-resumable': '1.0.0', 'upload-length': '10', 'upload-metadata': meta({ bucket: 'big', key: 'mine' }) });
    const url = `${stack.url}${created.headers.location}`;
    const { token } = (await (await fetch(`${stack.url}/v0/signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { token: string };
    expect((await raw(url, 'HEAD', { authorization: `Bearer ${token}`, 'tus-resumable': '1.0.0' })).status).toBe(404);
    expect((await raw(url, 'HEAD', { 'tus-resumable': '1.0.0' })).status).toBe(401);
  });
  it('the SDK\'s storage.upload goes resumable above one request\'s limit', async () => {
    const data = randomBytes(40 * MiB);
    const urls: string[] = [];
    const seen: number[] = [];
    const client = createClient({ baseUrl: stack.url, token: auth.authorization!.slice('Bearer '.length) });
    const row = await client.project(projectId).storage.upload('big', 'sdk.bin', new Blob([data]), {
      contentType: 'application/x-test',
      onUploadUrl: (url) => urls.push(url),
      onProgress: ({ loaded }) => seen.push(loaded),
    });
    expect(urls).toHaveLength(1);
    expect(row).toMatchObject({ key: 'sdk.bin', size: 40 * MiB, state: 'stored', content_type: 'application/x-test' });
    expect(seen.at(-1)).toBe(40 * MiB);
    expect(sha256((await object('sdk.bin')).body)).toBe(sha256(data));
  }, 120_000);

  it('svc storage cp, killed in the middle and run again, resumes the same upload', async () => {
    const data = randomBytes(64 * MiB);
    const file = join(dir.dir, 'cli-upload.bin');
    writeFileSync(file, data);
    const config = join(dir.dir, 'cli-config');
    const run = () =>
      spawn(process.execPath, [join(REPO, 'dist/client/svc.mjs'), 'storage', 'cp', file, `${projectId}:big/cli.bin`, '--json'], {
        env: { PATH: process.env.PATH!, HOME: dir.dir, SVC_CONFIG_DIR: config, SVC_BASE_URL: stack.url, SVC_TOKEN: auth.authorization!.slice('Bearer '.length) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    const saved = () => {
      try {
        return Object.values(JSON.parse(readFileSync(join(config, 'uploads.json'), 'utf8')) as Record<string, { url: string }>).map((e) => e.url);
      } catch {
        return [];
      }
    };
    const headOf = async (url: string) => {
      const res = await fetch(url, { method: 'HEAD', headers: { ...auth, 'tus-resumable': '1.0.0' } });
      return { status: res.status, offset: Number(res.headers.get('upload-offset')) };
    };
    const first = run();
    const exited = new Promise((r) => first.once('exit', r));
    await expect.poll(saved, { timeout: 30_000, interval: 20 }).toHaveLength(1);
    const [url] = saved();
    await expect.poll(async () => (await headOf(url!)).offset, { timeout: 30_000, interval: 20 }).toBeGreaterThanOrEqual(8 * MiB);
    first.kill('SIGKILL');
    await exited;
    const cut = await headOf(url!);
    expect(cut.offset).toBeLessThan(data.byteLength);
    const second = run();
    let out = '';
    second.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
    const code = await new Promise((r) => second.once('exit', r));
    expect(code).toBe(0);
    expect(JSON.parse(out)).toMatchObject({ key: 'cli.bin', size: data.byteLength, state: 'stored' });
    // The upload the first run started is the one that completed (not a new one), and is forgotten.
    expect(await headOf(url!)).toEqual({ status: 200, offset: data.byteLength });
    expect(saved()).toEqual([]);
    expect(sha256((await object('cli.bin')).body)).toBe(sha256(data));
  }, 180_000);

  it('bucket force-delete removes pending rows; an upload into the deleted bucket cannot complete', async () => {
    const tusAuth = { ...auth, 'tus-resumable': '1.0.0' };
    expect((await fetch(`${storage}/buckets/doomed`, { method: 'PUT', headers: auth })).status).toBe(201);
    const ticket = await fetch(`${storage}/uploads`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ bucket: 'doomed', key: 'never-sent' }) });
    expect(ticket.status).toBe(201);
    const created = await raw(endpoint, 'POST', { ...tusAuth, 'upload-length': '4', 'upload-metadata': meta({ bucket: 'doomed', key: 'late' }) });
    expect(created.status).toBe(201);
    expect((await fetch(`${storage}/buckets/doomed`, { method: 'DELETE', headers: auth })).status).toBe(409);
    expect((await fetch(`${storage}/buckets/doomed?force=true`, { method: 'DELETE', headers: auth })).status).toBe(200);
    expect((await fetch(`${storage}/objects?bucket=doomed`, { headers: auth })).status).toBe(404);
    const last = await raw(`${stack.url}${created.headers.location}`, 'PATCH', { ...tusAuth, 'upload-offset': '0', 'content-type': 'application/offset+octet-stream', 'content-length': '4' }, 4);
    expect(last.status).toBe(404);
  });

  it('kill -9 of the agent at random points leaves a resumable upload or the stored object, never a row without its bytes', async () => {
    const tusAuth = { ...auth, 'tus-resumable': '1.0.0' };
    const chunk = 8 * MiB;
    for (let round = 0; round < 4; round++) {
      const data = randomBytes(3 * chunk);
      const key = `killed-${round}`;
      const created = await raw(endpoint, 'POST', { ...tusAuth, 'upload-length': String(data.byteLength), 'upload-metadata': meta({ bucket: 'big', key }) });
      expect(created.status).toBe(201);
      const url = `${stack.url}${created.headers.location}`;
      const patch = (offset: number) => fetch(url, { method: 'PATCH', headers: { ...tusAuth, 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream' }, body: data.subarray(offset, offset + chunk) });
      const sending = (async () => {
        for (let offset = 0; offset < data.byteLength; offset += chunk) if ((await patch(offset)).status !== 204) return;
      })().catch(() => {});
      await new Promise((r) => setTimeout(r, Math.random() * 600));
      const agent = stack.agents[0]!.process;
      const exited = new Promise((r) => agent.once('exit', r));
      agent.kill('SIGKILL');
      await exited;
      await sending;
      await stack.restartAgent(0);
      // Resumable (HEAD answers an offset the bytes before which are kept), or already the object.
      const head = await fetch(url, { method: 'HEAD', headers: tusAuth });
      expect(head.status).toBe(200);
      let offset = Number(head.headers.get('upload-offset'));
      expect(offset % chunk === 0 || offset === data.byteLength).toBe(true);
      const before = await object(key);
      if (offset < data.byteLength) expect(before.status).toBe(404);
      while (offset < data.byteLength) {
        const res = await patch(offset);
        expect(res.status).toBe(204);
        offset = Number(res.headers.get('upload-offset'));
      }
      const got = await object(key);
      expect(got.status).toBe(200);
      expect(sha256(got.body)).toBe(sha256(data));
    }
    if (backend === 'fs') expect(filesUnder(uploadsDir())).toEqual([]);
  }, 300_000);
});

describe.each(['fs', 's3'] as const)('resumable uploads expire on the %s backend', (backend) => {
  let stack: Stack;
  let dir: ReturnType<typeof tempDir>;
  let tusAuth: Record<string, string>;
  let endpoint: string;
  let projectId: string;

  beforeAll(async () => {
    dir = tempDir(`svc-resumable-expiry-${backend}-`);
    stack = await startSuiteStack(dir.dir, { SVCD_RESUMABLE_EXPIRY_SECONDS: '2', ...(backend === 's3' ? s3TestSettings(inject('s3Endpoint')) : {}) });
    const post = async (path: string, body: unknown, headers: Record<string, string> = {}) =>
      (await (await fetch(`${stack.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })).json()) as Record<string, string>;
    const { token } = await post('/v0/signup', {});
    tusAuth = { authorization: `Bearer ${token}`, 'tus-resumable': '1.0.0' };
    const { id } = await post('/v0/projects', { name: 'expiry' }, { authorization: `Bearer ${token}` });
    projectId = id!;
    endpoint = `${stack.url}/v0/projects/${id}/storage/resumable`;
    expect((await fetch(`${stack.url}/v0/projects/${id}/storage/buckets/bkt`, { method: 'PUT', headers: { authorization: `Bearer ${token}` } })).status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
    dir?.cleanup();
  });

  it('an unfinished upload answers 404 after its expiry, and its bytes are removed by the agent without being asked', async () => {
    const start = (key: string) => raw(endpoint, 'POST', { ...tusAuth, 'upload-length': String(8 * MiB), 'upload-metadata': meta({ bucket: 'bkt', key }), 'content-type': 'application/offset+octet-stream', 'content-length': String(MiB) }, MiB);
    const asked = await start('asked');
    const left = await start('left');
    expect(asked.status).toBe(201);
    expect(left.status).toBe(201);
    expect(Date.parse(String(asked.headers['upload-expires']))).toBeGreaterThan(Date.now() - 5000);
    const uploads = join(stack.agents[0]!.root, 'blobs', '.uploads');
    const s3 = new S3Client({ endpoint: inject('s3Endpoint'), region: 'us-east-1', forcePathStyle: true, credentials: S3RVER_CREDENTIALS });
    const tails = async () => ((await s3.send(new ListObjectsV2Command({ Bucket: S3_TEST_BUCKET, Prefix: `uploads/${projectId}/` }))).Contents ?? []).map((o) => o.Key);
    if (backend === 'fs') expect(filesUnder(uploads)).toHaveLength(2);
    if (backend === 's3') expect(await tails()).toHaveLength(2);
    await new Promise((r) => setTimeout(r, 2500));
    expect((await raw(`${stack.url}${asked.headers.location}`, 'HEAD', tusAuth)).status).toBe(404);
    // The other one, never asked about again: the agent's sweep (every 2 s here) removes it. On s3
    // its 1 MiB sits in the upload's incomplete part (below S3's 5 MiB part minimum).
    if (backend === 'fs') await expect.poll(() => filesUnder(uploads), { timeout: 10_000, interval: 500 }).toEqual([]);
    if (backend === 's3') await expect.poll(tails, { timeout: 10_000, interval: 500 }).toEqual([]);
    s3.destroy();
    await expect.poll(async () => (await raw(`${stack.url}${left.headers.location}`, 'HEAD', tusAuth)).status, { timeout: 10_000 }).toBe(404);
  }, 60_000);
});
