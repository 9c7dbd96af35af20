/**
 * Object storage where it ships: the handlers bundle in miniflare (workerd) with the real host agent,
 * over HTTP, on both backends. workerd differs from Node where it matters here (no DOMParser for
 * S3's XML, stream bodies and their lengths, FixedLengthStream, Web Crypto), so the byte paths are
 * run through it: with and without a length (multipart on s3), ranges, 413 both ways, an odd key;
 * and what storage management adds (docs/storage.md): signed URLs, conditional PUTs, prefix and
 * delimiter listings, a forced bucket delete.
 */
import { checkedJson } from '../helpers/openapi.ts';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startStack, type Stack } from '../../infra/local/stack.ts';
import { tempDir, uniqueTable } from '../helpers/env.ts';
import { s3TestSettings } from '../setup/s3rver.ts';
import { patternBytes, webStreamOf } from '../helpers/bytes.ts';

const MiB = 1024 * 1024;



describe.each(['fs', 's3'] as const)('object storage in workerd on the %s backend', (backend) => {
  let stack: Stack;
  let dir: ReturnType<typeof tempDir>;
  let auth: Record<string, string>;
  let base: string;

  beforeAll(async () => {
    dir = tempDir(`svc-storage-workerd-${backend}-`);
    stack = await startStack({
      dir: dir.dir,
      dynamoEndpoint: inject('dynamoEndpoint'),
      env: {
        SVCD_TABLE: uniqueTable(),
        SVCD_PORT: '0',
        SVCD_AGENT_PORT: '0',
        SVCD_DATAPLANE_PORT: '0',
        ...(backend === 's3' ? s3TestSettings(inject('s3Endpoint')) : {}),
      },
      agentOutput: 'collect',
      log: () => {},
    });
    const post = async (path: string, body: unknown, headers: Record<string, string> = {}) =>
      (await checkedJson(stack.url, 'POST', path, await fetch(`${stack.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) }))) as Record<string, string>;
    const { token } = await post('/v0/signup', {});
    auth = { authorization: `Bearer ${token}` };
    const { id } = await post('/v0/projects', { name: 'workerd' }, auth);
    base = `${stack.url}/v0/projects/${id}/storage`;
    expect((await fetch(`${base}/buckets/wdb`, { method: 'PUT', headers: auth })).status).toBe(201);
  });
  afterAll(async () => {
    await stack?.stop();
    dir?.cleanup();
  });
  // Every JSON answer is checked against the service's OpenAPI document (test/helpers/openapi.ts).
  const checked = (method: string, r: Response) => checkedJson(stack.url, method, new URL(r.url).pathname, r);

  it('stores and serves bytes sent with a length, and serves ranges of them', async () => {
    const data = patternBytes(3 * MiB + 7, 1);
    const put = await fetch(`${base}/objects/wdb/dir/a%20b%3F%23.bin`, { method: 'PUT', headers: { ...auth, 'content-type': 'image/png' }, body: data });
    expect(put.status).toBe(201);
    const row = (await checked('PUT', put)) as Record<string, any>;
    expect(row).toMatchObject({ key: 'dir/a b?#.bin', size: data.byteLength, content_type: 'image/png', backend });
    if (backend === 'fs') expect(row.etag).toBe(createHash('sha256').update(data).digest('hex'));
    else expect(row.etag).toBe(createHash('md5').update(data).digest('hex'));

    const get = await fetch(`${base}/objects/wdb/dir/a%20b%3F%23.bin`, { headers: auth });
    expect(get.status).toBe(200);
    expect(get.headers.get('content-length')).toBe(String(data.byteLength));
    expect(get.headers.get('etag')).toBe(`"${row.etag}"`);
    expect(get.headers.get('x-svc-object-id')).toBe(row.id);
    expect(new Uint8Array(await get.arrayBuffer())).toEqual(data);

    for (const [range, start, end] of [['bytes=0-0', 0, 0], ['bytes=100-199', 100, 199], ['bytes=-10', data.byteLength - 10, data.byteLength - 1]] as const) {
      const r = await fetch(`${base}/objects/wdb/dir/a%20b%3F%23.bin`, { headers: { ...auth, range } });
      expect(r.status, range).toBe(206);
      expect(r.headers.get('content-length')).toBe(String(end - start + 1));
      expect(new Uint8Array(await r.arrayBuffer())).toEqual(data.slice(start, end + 1));
    }
  });

  it('stores bytes streamed without a length (several parts on s3)', async () => {
    const data = patternBytes(17 * MiB + 3, 2);
    const put = await fetch(`${base}/objects/wdb/streamed`, { method: 'PUT', headers: auth, body: webStreamOf(data, 256 * 1024), duplex: 'half' } as RequestInit);
    expect(put.status).toBe(201);
    expect(((await checked('PUT', put)) as any).size).toBe(data.byteLength);
    const get = await fetch(`${base}/objects/wdb/streamed`, { headers: auth });
    expect(createHash('sha256').update(new Uint8Array(await get.arrayBuffer())).digest('hex')).toBe(createHash('sha256').update(data).digest('hex'));
  });

  it('refuses 33 MiB with 413 whether the length is declared or counted, and stores nothing', async () => {
    const declared = await fetch(`${base}/objects/wdb/big`, { method: 'PUT', headers: auth, body: new Uint8Array(33 * MiB) });
    expect(declared.status).toBe(413);
    const counted = await fetch(`${base}/objects/wdb/big`, { method: 'PUT', headers: auth, body: webStreamOf(new Uint8Array(33 * MiB), 256 * 1024), duplex: 'half' } as RequestInit);
    expect(counted.status).toBe(413);
    expect(((await checked('PUT', counted)) as any).error.code).toBe('payload_too_large');
    const list = (await checked('GET', await fetch(`${base}/objects?bucket=wdb`, { headers: auth }))) as any;
    expect(list.objects.map((o: any) => o.key)).not.toContain('big');
  });

  it('deletes an object and its bytes', async () => {
    await fetch(`${base}/objects/wdb/gone`, { method: 'PUT', headers: auth, body: patternBytes(10, 3) });
    const d = await fetch(`${base}/objects`, { method: 'DELETE', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ bucket: 'wdb', key: 'gone' }) });
    expect(d.status).toBe(200);
    expect(await checked('DELETE', d)).toMatchObject({ bucket: 'wdb', key: 'gone' });
    expect((await fetch(`${base}/objects/wdb/gone`, { headers: auth })).status).toBe(404);
  });

  it('a signed URL reads the object without a session; altered, it is 401', async () => {
    await fetch(`${base}/objects/wdb/shared/report%201.pdf`, { method: 'PUT', headers: { ...auth, 'content-type': 'application/pdf' }, body: patternBytes(1000, 5) });
    const r = await fetch(`${base}/downloads`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ bucket: 'wdb', key: 'shared/report 1.pdf', signed: true, expires_in: 300 }) });
    const ticket = (await checked('POST', r)) as Record<string, string>;
    const g = await fetch(`${stack.url}${ticket.signed_url}`);
    expect(g.status).toBe(200);
    expect(g.headers.get('content-type')).toBe('application/pdf');
    expect(new Uint8Array(await g.arrayBuffer())).toEqual(patternBytes(1000, 5));
    const altered = await fetch(`${stack.url}${ticket.signed_url!.replace(/signature=./, (m) => (m.endsWith('A') ? `${m.slice(0, -1)}B` : `${m.slice(0, -1)}A`))}`);
    expect(altered.status).toBe(401);
    expect(altered.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
    await altered.arrayBuffer();
  });

  it('a create-only PUT answers 201 then 409; listings roll up at the delimiter; a forced bucket delete empties and removes it', async () => {
    await fetch(`${base}/buckets/tree`, { method: 'PUT', headers: auth });
    const once = (key: string) => fetch(`${base}/objects/tree/${key}`, { method: 'PUT', headers: { ...auth, 'if-none-match': '*' }, body: patternBytes(8) });
    expect((await once('a/1')).status).toBe(201);
    const again = await once('a/1');
    expect(again.status).toBe(409);
    expect(((await checked('PUT', again)) as any).error.code).toBe('conflict');
    for (const key of ['a/2', 'b/1', 'top']) expect((await once(key)).status).toBe(201);
    const listed = (await checked('GET', await fetch(`${base}/objects?bucket=tree&delimiter=/`, { headers: auth }))) as any;
    expect(listed.objects.map((o: any) => o.key)).toEqual(['top']);
    expect(listed.common_prefixes).toEqual(['a/', 'b/']);
    expect((await fetch(`${base}/buckets/tree`, { method: 'DELETE', headers: auth })).status).toBe(409);
    const d = await fetch(`${base}/buckets/tree?force=true`, { method: 'DELETE', headers: auth });
    expect(d.status).toBe(200);
    expect(await checked('DELETE', d)).toMatchObject({ name: 'tree' });
    expect((await fetch(`${base}/objects?bucket=tree`, { headers: auth })).status).toBe(404);
  });
});
