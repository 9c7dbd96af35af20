/**
 * Object storage, every contract row on both blob backends (docs/storage.md): one suite run against `fs`
 * (the host agent's files) and `s3` (s3rver). Real DynamoDB Local, a real host agent, real s3rver;
 * the only injected fault is a DynamoDB client that refuses the catalog transaction.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildDeps } from '../../handlers/deps.ts';
import { createApp } from '../../handlers/index.ts';
import type { Db } from '../../shared/db/client.ts';
import { serveFetch, type Served } from '../../shared/http/node-http.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { s3TestSettings } from '../setup/s3rver.ts';
import { storageDriver } from '../helpers/storage.ts';
import { patternBytes, webStreamOf } from '../helpers/bytes.ts';

const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const MiB = 1024 * 1024;
const ROW_FIELDS = ['backend', 'bucket', 'content_type', 'created_at', 'etag', 'id', 'key', 'project', 'size', 'state', 'updated_at'];



/** A stream of `n` zero bytes produced on demand (never held whole). */
function zeros(n: number): ReadableStream<Uint8Array> {
  let left = n;
  return new ReadableStream({
    pull(c) {
      if (left <= 0) return c.close();
      const k = Math.min(left, 256 * 1024);
      c.enqueue(new Uint8Array(k));
      left -= k;
    },
  });
}

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const md5 = (b: Uint8Array) => createHash('md5').update(b).digest('hex');

describe.each(['fs', 's3'] as const)('object storage on the %s backend', (backend) => {
  let svc: TestService;
  let token: string;
  let accountId: string;
  let prj: string;

  const driver = storageDriver(() => svc, () => ({ token, projectId: prj }), backend);
  const { send, sendJson, base, objectUrl, exec, settled, blobsOf } = driver;

  async function makeBucket(name: string) {
    const r = await send('PUT', `${base()}/buckets/${name}`);
    expect([200, 201]).toContain(r.status);
  }

  async function put(bucket: string, key: string, bytes: Uint8Array, headers: Record<string, string> = {}) {
    return send('PUT', objectUrl(bucket, key), { body: bytes, headers: { 'content-length': String(bytes.byteLength), ...headers } });
  }

  async function getBytes(bucket: string, key: string, headers: Record<string, string> = {}) {
    const r = await send('GET', objectUrl(bucket, key), { headers });
    const bytes = new Uint8Array(await r.arrayBuffer());
    return { r, bytes, error: () => (JSON.parse(new TextDecoder().decode(bytes)) as { error: { code: string; message: string } }).error };
  }

  async function list(bucket: string, query = ''): Promise<Record<string, any>> {
    const r = await send('GET', `${base()}/objects?bucket=${bucket}${query}`);
    expect(r.status).toBe(200);
    return (await r.json()) as Record<string, any>;
  }

  /** Temp files of the fs backend (a failed write must leave none). */
  function fsTempFiles(): string[] {
    const dir = join(svc.env.SVCD_ROOT!, 'blobs', '.tmp');
    return existsSync(dir) ? readdirSync(dir) : [];
  }

  beforeAll(async () => {
    svc = await startTestService(backend === 's3' ? s3TestSettings(inject('s3Endpoint')) : {});
    ({ token, accountId } = await signup(svc));
    const r = await svc.request('POST', '/v0/projects', { token, body: { name: `storage-${backend}` } });
    prj = ((await r.json()) as { id: string }).id;
  });
  afterAll(() => svc?.stop());

  describe('buckets', () => {
    it('PUT creates a bucket with 201, then answers the same record with 200', async () => {
      const a = await send('PUT', `${base()}/buckets/photos`);
      expect(a.status).toBe(201);
      const created = (await a.json()) as Record<string, any>;
      expect(created).toEqual({ project: prj, name: 'photos', created_at: expect.stringMatching(RFC3339_UTC) });
      const b = await send('PUT', `${base()}/buckets/photos`);
      expect(b.status).toBe(200);
      expect(await b.json()).toEqual(created);
    });

    it('refuses names outside the bucket pattern with 400', async () => {
      for (const name of ['ab', 'A-bucket', '-abc', 'abc-', 'a_b_c', 'a.b.c', 'x'.repeat(64), 'caf%C3%A9', 'a%2Fb']) {
        const r = await send('PUT', `${base()}/buckets/${name}`);
        expect(r.status, name).toBe(400);
        expect(((await r.json()) as any).error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/^bucket: /) });
      }
      expect((await send('PUT', `${base()}/buckets/${'x'.repeat(63)}`)).status).toBe(201);
      expect((await send('PUT', `${base()}/buckets/a-1`)).status).toBe(201);
    });

    it('lists buckets by name, paginated', async () => {
      for (const n of ['list-c', 'list-a', 'list-b']) await makeBucket(n);
      const all = (await (await send('GET', `${base()}/buckets?limit=1000`)).json()) as Record<string, any>;
      const names = all.buckets.map((b: any) => b.name);
      expect(names).toEqual([...names].sort());
      expect(names).toEqual(expect.arrayContaining(['list-a', 'list-b', 'list-c']));
      expect(all.next_cursor).toBeNull();
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page = (await (await send('GET', `${base()}/buckets?limit=2${cursor ? `&cursor=${cursor}` : ''}`)).json()) as Record<string, any>;
        expect(page.buckets.length).toBeLessThanOrEqual(2);
        seen.push(...page.buckets.map((b: any) => b.name));
        cursor = page.next_cursor;
      } while (cursor);
      expect(seen).toEqual(names);
    });

    it('keeps buckets per project: another project does not see them', async () => {
      const r = await svc.request('POST', '/v0/projects', { token, body: { name: 'other' } });
      const other = ((await r.json()) as { id: string }).id;
      const page = (await (await send('GET', `/v0/projects/${other}/storage/buckets`)).json()) as Record<string, any>;
      expect(page.buckets).toEqual([]);
    });
  });

  describe('upload tickets and pending rows', () => {
    beforeAll(() => makeBucket('tickets'));

    it('reserves a pending row and answers where to PUT the bytes', async () => {
      const r = await sendJson('POST', `${base()}/uploads`, { bucket: 'tickets', key: 'docs/report 1.pdf', content_type: 'application/pdf' });
      expect(r.status).toBe(201);
      const t = (await r.json()) as Record<string, any>;
      expect(t.object_id).toMatch(/^obj_[0-9a-f]{16}$/);
      expect(t.method).toBe('PUT');
      expect(t.upload_url).toBe(`/v0/projects/${prj}/storage/objects/tickets/docs/report%201.pdf`);
      expect(t.headers).toEqual({ 'content-type': 'application/pdf' });
      expect(t.max_bytes).toBe(32 * MiB);
      expect(t.expires_at).toMatch(RFC3339_UTC);
      const ttl = Date.parse(t.expires_at) - Date.now();
      expect(ttl).toBeGreaterThan(14 * 60_000);
      expect(ttl).toBeLessThanOrEqual(15 * 60_000);

      const listed = await list('tickets');
      const row = listed.objects.find((o: any) => o.key === 'docs/report 1.pdf');
      expect(Object.keys(row).sort()).toEqual(ROW_FIELDS);
      expect(row).toMatchObject({ id: t.object_id, project: prj, bucket: 'tickets', state: 'pending', backend, content_type: 'application/pdf' });
    });

    it('answers 404 for the bytes and the download ticket of a pending row', async () => {
      await sendJson('POST', `${base()}/uploads`, { bucket: 'tickets', key: 'pending-only' });
      const { r, error } = await getBytes('tickets', 'pending-only');
      expect(r.status).toBe(404);
      expect(error().code).toBe('not_found');
      const d = await sendJson('POST', `${base()}/downloads`, { bucket: 'tickets', key: 'pending-only' });
      expect(d.status).toBe(404);
    });

    it('a PUT to the ticket URL stores the bytes under the ticket id (201) and the row turns stored', async () => {
      const t = (await (await sendJson('POST', `${base()}/uploads`, { bucket: 'tickets', key: 'img/a.png', content_type: 'image/png' })).json()) as any;
      const bytes = patternBytes(1000);
      const r = await send('PUT', t.upload_url, { body: bytes, headers: t.headers });
      expect(r.status).toBe(201);
      const row = (await r.json()) as Record<string, any>;
      expect(row).toMatchObject({ id: t.object_id, state: 'stored', size: 1000, content_type: 'image/png', backend });
      expect((await list('tickets')).objects.find((o: any) => o.key === 'img/a.png')).toEqual(row);
    });

    it('a second ticket for a stored object keeps it stored and readable, with the same id', async () => {
      await put('tickets', 'kept', patternBytes(10));
      const t = (await (await sendJson('POST', `${base()}/uploads`, { bucket: 'tickets', key: 'kept' })).json()) as any;
      const { r, bytes } = await getBytes('tickets', 'kept');
      expect(r.status).toBe(200);
      expect(bytes).toEqual(patternBytes(10));
      expect(r.headers.get('x-svc-object-id')).toBe(t.object_id);
    });

    it('refuses bad ticket bodies with 400 naming the field, and an unknown bucket with 404', async () => {
      const cases: [unknown, RegExp][] = [
        [{ key: 'a' }, /^bucket: /],
        [{ bucket: 'tickets' }, /^key: /],
        [{ bucket: 'tickets', key: '' }, /^key: /],
        [{ bucket: 'tickets', key: 'x'.repeat(1025) }, /^key: /],
        [{ bucket: 'tickets', key: 'a', content_type: 'x'.repeat(256) }, /^content_type: /],
        [{ bucket: 'tickets', key: 'a', content_type: 'text/plain\r\nx-evil: 1' }, /^content_type: /],
        [{ bucket: 'tickets', key: 'a', extra: 1 }, /^extra: is not a known field$/],
      ];
      for (const [body, message] of cases) {
        const r = await sendJson('POST', `${base()}/uploads`, body);
        expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
        expect(((await r.json()) as any).error.message).toMatch(message);
      }
      expect((await sendJson('POST', `${base()}/uploads`, { bucket: 'tickets', key: 'x'.repeat(1024) })).status).toBe(201);
      expect((await sendJson('POST', `${base()}/uploads`, { bucket: 'no-such-bucket', key: 'a' })).status).toBe(404);
    });
  });

  describe('object bytes', () => {
    beforeAll(() => makeBucket('bytes'));

    it('PUT without a ticket creates the row (201); a second PUT replaces it (200) keeping the id', async () => {
      const first = patternBytes(5000, 1);
      const a = await put('bytes', 'data.bin', first, { 'content-type': 'application/x-test' });
      expect(a.status).toBe(201);
      const row = (await a.json()) as Record<string, any>;
      expect(Object.keys(row).sort()).toEqual(ROW_FIELDS);
      expect(row).toMatchObject({ project: prj, bucket: 'bytes', key: 'data.bin', size: 5000, state: 'stored', backend, content_type: 'application/x-test' });
      expect(row.id).toMatch(/^obj_[0-9a-f]{16}$/);
      expect(row.etag).toBe(backend === 'fs' ? sha256(first) : md5(first));
      expect(row.created_at).toMatch(RFC3339_UTC);

      const second = patternBytes(7000, 2);
      const b = await put('bytes', 'data.bin', second);
      expect(b.status).toBe(200);
      const replaced = (await b.json()) as Record<string, any>;
      expect(replaced).toMatchObject({ id: row.id, size: 7000, content_type: 'application/octet-stream', created_at: row.created_at });
      expect(replaced.etag).not.toBe(row.etag);
      expect(Date.parse(replaced.updated_at)).toBeGreaterThanOrEqual(Date.parse(row.updated_at));
      const { bytes } = await getBytes('bytes', 'data.bin');
      expect(bytes).toEqual(second);
    });

    it('the replaced blob is deleted after the flip: one blob per object', async () => {
      const before = await blobsOf();
      await put('bytes', 'one-blob', patternBytes(10, 1));
      const afterFirst = await blobsOf();
      await put('bytes', 'one-blob', patternBytes(10, 2));
      await put('bytes', 'one-blob', patternBytes(10, 3));
      const after = await blobsOf();
      expect(afterFirst.length).toBe(before.length + 1);
      expect(after.length).toBe(afterFirst.length);
    });

    it('the replaced blob is deleted after the answer, as work handed to the runtime, not before it', async () => {
      await put('bytes', 'later', patternBytes(10, 1));
      const before = new Set(await blobsOf());
      const r = await put('bytes', 'later', patternBytes(10, 2));
      expect(r.status).toBe(200);
      // Answered with the old blob's delete still to run (it needs a round trip to the store)...
      expect(driver.unsettled()).toBe(1);
      const { bytes } = await getBytes('bytes', 'later');
      expect(bytes).toEqual(patternBytes(10, 2));
      // ...and once that work is done, only the new blob is left.
      const after = await blobsOf();
      expect(after.length).toBe(before.size);
      expect(after.filter((b) => !before.has(b))).toHaveLength(1);
    });

    it('streams a body without Content-Length, counting it (several MiB, multipart on s3)', async () => {
      const big = patternBytes(9 * MiB + 123, 5);
      const r = await send('PUT', objectUrl('bytes', 'streamed'), { body: webStreamOf(big) });
      expect(r.status).toBe(201);
      const row = (await r.json()) as Record<string, any>;
      expect(row.size).toBe(big.byteLength);
      if (backend === 'fs') expect(row.etag).toBe(sha256(big));
      const { r: g, bytes } = await getBytes('bytes', 'streamed');
      expect(g.headers.get('content-length')).toBe(String(big.byteLength));
      expect(sha256(bytes)).toBe(sha256(big));
    });

    it('stores an empty object', async () => {
      const r = await put('bytes', 'empty', new Uint8Array(0));
      expect(r.status).toBe(201);
      expect(((await r.json()) as any).size).toBe(0);
      const { r: g, bytes } = await getBytes('bytes', 'empty');
      expect(g.status).toBe(200);
      expect(g.headers.get('content-length')).toBe('0');
      expect(bytes.byteLength).toBe(0);
    });

    it('GET answers the bytes with Content-Type, ETag, X-Svc-Object-Id and Content-Length', async () => {
      const data = patternBytes(3000, 9);
      const row = (await (await put('bytes', 'hdr.txt', data, { 'content-type': 'text/plain; charset=utf-8' })).json()) as any;
      const { r, bytes } = await getBytes('bytes', 'hdr.txt');
      expect(r.status).toBe(200);
      expect(bytes).toEqual(data);
      expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(r.headers.get('etag')).toBe(`"${row.etag}"`);
      expect(r.headers.get('x-svc-object-id')).toBe(row.id);
      expect(r.headers.get('content-length')).toBe('3000');
      expect(r.headers.get('accept-ranges')).toBe('bytes');
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    });

    it('HEAD answers the headers without the bytes', async () => {
      await put('bytes', 'head-me', patternBytes(77));
      const r = await send('HEAD', objectUrl('bytes', 'head-me'));
      expect(r.status).toBe(200);
      expect(r.headers.get('content-length')).toBe('77');
      expect((await r.arrayBuffer()).byteLength).toBe(0);
    });

    it('Range answers 206 with Content-Range; out of range is 416; malformed ranges answer the whole object', async () => {
      const data = patternBytes(100, 3);
      await put('bytes', 'ranged', data);
      const cases: [string, number, number][] = [['bytes=10-19', 10, 19], ['bytes=90-', 90, 99], ['bytes=-5', 95, 99], ['bytes=95-1000', 95, 99], ['bytes=0-0', 0, 0]];
      for (const [range, start, end] of cases) {
        const { r, bytes } = await getBytes('bytes', 'ranged', { range });
        expect(r.status, range).toBe(206);
        expect(r.headers.get('content-range')).toBe(`bytes ${start}-${end}/100`);
        expect(r.headers.get('content-length')).toBe(String(end - start + 1));
        expect(bytes).toEqual(data.slice(start, end + 1));
      }
      for (const range of ['bytes=100-', 'bytes=500-600', 'bytes=-0']) {
        const { r } = await getBytes('bytes', 'ranged', { range });
        expect(r.status, range).toBe(416);
        expect(r.headers.get('content-range')).toBe('bytes */100');
      }
      for (const range of ['bytes=5-2', 'items=0-5', 'bytes=0-1,5-6', 'garbage']) {
        const { r, bytes } = await getBytes('bytes', 'ranged', { range });
        expect(r.status, range).toBe(200);
        expect(bytes).toEqual(data);
      }
    });

    it('If-None-Match with the current ETag answers 304 without a body; a stale one answers the bytes', async () => {
      const row = (await (await put('bytes', 'cached', patternBytes(50))).json()) as any;
      for (const inm of [`"${row.etag}"`, `W/"${row.etag}"`, `"other", "${row.etag}"`, '*']) {
        const { r, bytes } = await getBytes('bytes', 'cached', { 'if-none-match': inm });
        expect(r.status, inm).toBe(304);
        expect(r.headers.get('etag')).toBe(`"${row.etag}"`);
        expect(bytes.byteLength).toBe(0);
      }
      const { r } = await getBytes('bytes', 'cached', { 'if-none-match': '"stale"' });
      expect(r.status).toBe(200);
    });

    it('answers 404 for an absent object and for an unknown bucket', async () => {
      for (const [bucket, key] of [['bytes', 'nope'], ['no-such-bucket', 'x']] as const) {
        const { r, error } = await getBytes(bucket, key);
        expect(r.status).toBe(404);
        expect(error().code).toBe('not_found');
      }
      const p = await put('no-such-bucket', 'x', patternBytes(3));
      expect(p.status).toBe(404);
    });

    it('a download ticket names the GET and carries the row', async () => {
      const row = (await (await put('bytes', 'dl/file.txt', patternBytes(12))).json()) as any;
      const r = await sendJson('POST', `${base()}/downloads`, { bucket: 'bytes', key: 'dl/file.txt' });
      expect(r.status).toBe(200);
      const t = (await r.json()) as Record<string, any>;
      expect(t).toEqual({
        method: 'GET',
        download_url: `/v0/projects/${prj}/storage/objects/bytes/dl/file.txt`,
        headers: {},
        expires_at: expect.stringMatching(RFC3339_UTC),
        object: row,
      });
      const g = await send('GET', t.download_url);
      expect(new Uint8Array(await g.arrayBuffer())).toEqual(patternBytes(12));
      expect((await sendJson('POST', `${base()}/downloads`, { bucket: 'bytes', key: 'absent' })).status).toBe(404);
    });

    it('refuses a malformed Content-Type or Content-Length with 400', async () => {
      expect((await put('bytes', 'ct', patternBytes(3), { 'content-type': 'x'.repeat(256) })).status).toBe(400);
      const r = await send('PUT', objectUrl('bytes', 'cl'), { body: patternBytes(3), headers: { 'content-length': 'abc' } });
      expect(r.status).toBe(400);
    });

    it('refuses a missing key with 400 (a path ending in a slash is no route: docs/api.md)', async () => {
      const r = await send('PUT', `${base()}/objects/bytes`, { body: patternBytes(3) });
      expect(r.status).toBe(400);
      expect(((await r.json()) as any).error.message).toMatch(/^key: /);
      expect((await send('PUT', `${base()}/objects/bytes/`, { body: patternBytes(3) })).status).toBe(404);
    });
  });

  describe('keys', () => {
    beforeAll(() => makeBucket('keys'));

    const odd = [
      'with space.txt',
      'unicode/café/日本語/😀.bin',
      'question?mark',
      'hash#tag',
      'percent%20literal%',
      'plus+sign',
      'a/b/c/d',
      'dir/',
      '/leading',
      'double//slash',
      "quote'\"<>&",
      'x'.repeat(1024),
      '😀'.repeat(1024),
    ];

    it('keys with spaces, unicode, ?, #, %, / and 1024 characters round-trip through PUT, GET, list and DELETE', async () => {
      for (const [i, key] of odd.entries()) {
        const data = patternBytes(20 + i, i);
        const p = await put('keys', key, data);
        expect(p.status, key.slice(0, 40)).toBe(201);
        expect(((await p.json()) as any).key).toBe(key);
        const { r, bytes } = await getBytes('keys', key);
        expect(r.status, key.slice(0, 40)).toBe(200);
        expect(bytes).toEqual(data);
      }
      const listed = (await list('keys', '&limit=1000')).objects.map((o: any) => o.key);
      expect(new Set(listed)).toEqual(new Set(odd));
      for (const key of odd) {
        const d = await sendJson('DELETE', `${base()}/objects`, { bucket: 'keys', key });
        expect(d.status, key.slice(0, 40)).toBe(200);
      }
      expect((await list('keys')).objects).toEqual([]);
    });

    it('the upload URL of a ticket reaches the same key, dot segments included', async () => {
      for (const key of ['../../etc/passwd', './x', 'a/../b', 'a/./b', '../', '...', 'sp ace/ü?#%']) {
        const t = (await (await sendJson('POST', `${base()}/uploads`, { bucket: 'keys', key })).json()) as any;
        // What an HTTP client does to the path before sending it.
        const path = new URL(t.upload_url, 'http://svc.test').pathname;
        const p = await send('PUT', path, { body: patternBytes(5) });
        expect(p.status, key).toBe(201);
        expect(((await p.json()) as any)).toMatchObject({ key, id: t.object_id });
      }
    });

    it('refuses the keys "." and "..", which no URL path can carry', async () => {
      for (const key of ['.', '..']) {
        const r = await sendJson('POST', `${base()}/uploads`, { bucket: 'keys', key });
        expect(r.status, key).toBe(400);
        expect(((await r.json()) as any).error.message).toMatch(/^key: /);
      }
    });

    it('refuses a key of 1025 characters and a key that is not valid percent-encoding', async () => {
      expect((await put('keys', 'y'.repeat(1025), patternBytes(1))).status).toBe(400);
      const r = await send('PUT', `${base()}/objects/keys/bad%ZZ`, { body: patternBytes(1) });
      expect(r.status).toBe(400);
      const s = await send('PUT', `${base()}/objects/keys/bad%ED%A0%80`, { body: patternBytes(1) });
      expect(s.status).toBe(400);
    });

    it('traversal keys stay names in the catalog: nothing escapes the blob root', async () => {
      const keys = ['../../x', '..%2F..%2Fescape', '%2e%2e/%2e%2e/y', '../' + '../'.repeat(20) + 'tmp/evil', '\\..\\..\\win'];
      for (const key of keys) {
        // `/` encoded as %2F so the client cannot collapse the dot segments first.
        const p = await send('PUT', `${base()}/objects/keys/${encodeURIComponent(key)}`, { body: patternBytes(9) });
        expect(p.status, key).toBe(201);
        expect(((await p.json()) as any).key).toBe(key);
        const g = await send('GET', `${base()}/objects/keys/${encodeURIComponent(key)}`);
        expect(new Uint8Array(await g.arrayBuffer())).toEqual(patternBytes(9));
      }
      // A path the client collapsed is a different route or a different key, never a file outside.
      const collapsed = await send('PUT', `${base()}/objects/keys/%2e%2e/%2e%2e/%2e%2e/zzz`, { body: patternBytes(1) });
      expect([400, 404]).toContain(collapsed.status);
      if (backend === 'fs') {
        const root = svc.env.SVCD_ROOT!;
        const blobRoot = join(root, 'blobs');
        // Only hashed names, two levels under the project's directory.
        for (const f of await blobsOf()) expect(f).toMatch(/^[0-9a-f]{2}\/[0-9a-f]{64}$/);
        expect(readdirSync(blobRoot).every((d) => d === '.tmp' || /^prj_[0-9a-f]{16}$/.test(d))).toBe(true);
        expect(readdirSync(root).filter((d) => /x|escape|evil|win|zzz/.test(d))).toEqual([]);
      } else {
        for (const k of await blobsOf()) expect(k).toMatch(new RegExp(`^blobs/${prj}/[0-9a-f]{64}$`));
      }
    });
  });

  describe('listing', () => {
    beforeAll(() => makeBucket('listing'));

    it('lists rows sorted by key (code point order), pending rows included, paginated by limit and cursor', async () => {
      const keys = ['b', 'a/z', 'a', 'A', 'a/b', 'é', '😀', '\uE000', 'zz', 'a b', 'a-b', '0'];
      for (const k of keys) await put('listing', k, patternBytes(1));
      await sendJson('POST', `${base()}/uploads`, { bucket: 'listing', key: 'm-pending' });
      const all = [...keys, 'm-pending'];
      const expected = [...all].sort((x, y) => (Buffer.compare(Buffer.from(x), Buffer.from(y))));
      const full = await list('listing', '&limit=1000');
      expect(full.bucket).toBe('listing');
      expect(full.objects.map((o: any) => o.key)).toEqual(expected);
      expect(full.next_cursor).toBeNull();
      expect(full.objects.find((o: any) => o.key === 'm-pending').state).toBe('pending');

      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await list('listing', `&limit=5${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(page.objects.length).toBeLessThanOrEqual(5);
        seen.push(...page.objects.map((o: any) => o.key));
        cursor = page.next_cursor;
        pages++;
      } while (cursor);
      expect(seen).toEqual(expected);
      expect(pages).toBe(Math.ceil(expected.length / 5));
    });

    it('answers 400 without a bucket or with a bad limit or cursor, and 404 for an unknown bucket', async () => {
      for (const q of ['', '?bucket=', '?bucket=listing&limit=0', '?bucket=listing&limit=1001', '?bucket=listing&cursor=abc', '?bucket=listing&cursor=%%']) {
        const r = await send('GET', `${base()}/objects${q}`);
        expect(r.status, q).toBe(400);
      }
      const page = await list('listing', '&limit=1');
      const r = await send('GET', `${base()}/objects?bucket=tickets&cursor=${encodeURIComponent(page.next_cursor)}`);
      expect(r.status).toBe(400);
      expect((await send('GET', `${base()}/objects?bucket=no-such-bucket`)).status).toBe(404);
    });
  });

  describe('DELETE', () => {
    beforeAll(() => makeBucket('deleting'));

    it('removes the row and the blob and answers the removed row; a second DELETE is 404', async () => {
      const row = (await (await put('deleting', 'gone', patternBytes(40))).json()) as any;
      const before = await blobsOf();
      const r = await sendJson('DELETE', `${base()}/objects`, { bucket: 'deleting', key: 'gone' });
      expect(r.status).toBe(200);
      expect(await r.json()).toEqual(row);
      expect((await blobsOf()).length).toBe(before.length - 1);
      expect((await getBytes('deleting', 'gone')).r.status).toBe(404);
      const again = await sendJson('DELETE', `${base()}/objects`, { bucket: 'deleting', key: 'gone' });
      expect(again.status).toBe(404);
      expect(((await again.json()) as any).error.code).toBe('not_found');
    });

    it('removes a pending row', async () => {
      const t = (await (await sendJson('POST', `${base()}/uploads`, { bucket: 'deleting', key: 'p' })).json()) as any;
      const r = await sendJson('DELETE', `${base()}/objects`, { bucket: 'deleting', key: 'p' });
      expect(r.status).toBe(200);
      expect(await r.json()).toMatchObject({ id: t.object_id, state: 'pending' });
    });

    it('refuses a body without bucket or key with 400, and an unknown bucket with 404', async () => {
      expect((await sendJson('DELETE', `${base()}/objects`, { bucket: 'deleting' })).status).toBe(400);
      expect((await sendJson('DELETE', `${base()}/objects`, { key: 'x' })).status).toBe(400);
      expect((await send('DELETE', `${base()}/objects`)).status).toBe(400);
      expect((await sendJson('DELETE', `${base()}/objects`, { bucket: 'no-such-bucket', key: 'x' })).status).toBe(404);
    });
  });

  describe('receipts', () => {
    it('object upload and delete are receipted with the target, the actor and the request id', async () => {
      await makeBucket('receipts');
      const p = await put('receipts', 'r/1', patternBytes(3));
      const d = await sendJson('DELETE', `${base()}/objects`, { bucket: 'receipts', key: 'r/1' });
      const r = await send('GET', `/v0/projects/${prj}/receipts?limit=1000`);
      const receipts = ((await r.json()) as any).receipts as Record<string, any>[];
      const mine = receipts.filter((x) => x.target === 'receipts/r/1');
      expect(mine.map((x) => x.op)).toEqual(['object.delete', 'object.put']);
      expect(mine[0]).toMatchObject({ project: prj, actor: accountId, request_id: d.headers.get('x-request-id') });
      expect(mine[1]).toMatchObject({ project: prj, actor: accountId, request_id: p.headers.get('x-request-id') });
    });

    it('a refused upload writes no receipt', async () => {
      const count = async () => ((await (await send('GET', `/v0/projects/${prj}/receipts?limit=1000`)).json()) as any).receipts.length;
      const before = await count();
      await send('PUT', objectUrl('receipts', 'huge'), { body: patternBytes(1), headers: { 'content-length': String(33 * MiB) } });
      await sendJson('DELETE', `${base()}/objects`, { bucket: 'receipts', key: 'never-there' });
      expect(await count()).toBe(before);
    });
  });

  describe('limits', () => {
    beforeAll(() => makeBucket('limits'));

    it('a 33 MiB body is refused with 413 and nothing is stored: declared by Content-Length', async () => {
      const before = await blobsOf();
      const r = await send('PUT', objectUrl('limits', 'huge'), { body: zeros(33 * MiB), headers: { 'content-length': String(33 * MiB) } });
      expect(r.status).toBe(413);
      const { error } = (await r.json()) as any;
      expect(error.code).toBe('payload_too_large');
      // It says what to do: the limit, and that a larger file goes as a resumable upload.
      expect(error.message).toMatch(/limit of 33554432 bytes \(32 MiB, SVCD_STORAGE_MAX_BYTES\).*resumable upload \(TUS 1\.0: POST \/v0\/projects\/\{id\}\/storage\/resumable/);
      expect((await getBytes('limits', 'huge')).r.status).toBe(404);
      expect(await blobsOf()).toEqual(before);
    });

    it('a 33 MiB body is refused with 413 and nothing is stored: streamed without a length, counted', async () => {
      const before = await blobsOf();
      const r = await send('PUT', objectUrl('limits', 'huge-stream'), { body: zeros(33 * MiB) });
      expect(r.status).toBe(413);
      expect(((await r.json()) as any).error.code).toBe('payload_too_large');
      expect((await list('limits')).objects).toEqual([]);
      expect(await blobsOf()).toEqual(before);
      // The handler's count answers first; the agent sees its body cut off and removes its temp
      // file right after (docs/storage.md "Streaming and the byte limit").
      if (backend === 'fs') await expect.poll(fsTempFiles, { timeout: 2000 }).toEqual([]);
    });

    it('a body of exactly the limit is stored', async () => {
      const r = await send('PUT', objectUrl('limits', 'exact'), { body: zeros(32 * MiB), headers: { 'content-length': String(32 * MiB) } });
      expect(r.status).toBe(201);
      expect(((await r.json()) as any).size).toBe(32 * MiB);
    });

    it('a refused upload to an existing key keeps the previous bytes', async () => {
      await put('limits', 'keep', patternBytes(30, 4));
      const r = await send('PUT', objectUrl('limits', 'keep'), { body: zeros(33 * MiB) });
      expect(r.status).toBe(413);
      expect((await getBytes('limits', 'keep')).bytes).toEqual(patternBytes(30, 4));
    });

    it('over real HTTP, a declared 33 MiB body is answered 413 before it is sent', async () => {
      const served: Served = await serveFetch((req) => svc.app.fetch(req), { host: '127.0.0.1', port: 0 });
      try {
        const { request } = await import('node:http');
        const status = await new Promise<number>((resolve, reject) => {
          const req = request(`${served.url}${objectUrl('limits', 'http-huge')}`, {
            method: 'PUT',
            headers: { authorization: `Bearer ${token}`, 'content-length': String(33 * MiB) },
          });
          req.on('response', (res) => {
            res.resume();
            resolve(res.statusCode!);
            req.destroy();
          });
          req.on('error', reject);
          req.write(new Uint8Array(1024)); // and then nothing more: the answer must not wait for it
        });
        expect(status).toBe(413);
      } finally {
        await served.close();
      }
    });
  });

  describe('nothing lost', () => {
    beforeAll(() => makeBucket('safety'));

    it('when the catalog write fails after the blob write, the row and the previous bytes stand and the new blob is removed', async () => {
      const original = patternBytes(500, 1);
      const row = (await (await put('safety', 'precious', original)).json()) as any;
      const blobsBefore = await blobsOf();

      let armed = true;
      const logs: string[] = [];
      const deps = buildDeps(svc.env, (l) => logs.push(l));
      const faulty: Db = {
        ...deps.db,
        doc: new Proxy(deps.db.doc, {
          get(target, prop, receiver) {
            if (prop !== 'send') return Reflect.get(target, prop, receiver);
            return (command: unknown, ...rest: unknown[]) => {
              if (armed && command instanceof TransactWriteCommand) throw new Error('injected: the catalog write failed');
              return (target.send as (...a: unknown[]) => unknown).call(target, command, ...rest);
            };
          },
        }),
      };
      const broken = createApp({ ...deps, db: faulty });
      const r = await broken.fetch(
        new Request(`http://svc.test${objectUrl('safety', 'precious')}`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${token}` },
          body: patternBytes(800, 2),
        }),
      );
      expect(r.status).toBe(500);
      armed = false;

      const { r: g, bytes } = await getBytes('safety', 'precious');
      expect(g.status).toBe(200);
      expect(bytes).toEqual(original);
      expect(g.headers.get('etag')).toBe(`"${row.etag}"`);
      expect((await list('safety')).objects).toEqual([row]);
      expect(await blobsOf()).toEqual(blobsBefore);
    });

    it('concurrent PUTs of one key end with one row, its id retained, and the bytes of the winning write', async () => {
      const first = (await (await put('safety', 'raced', patternBytes(100, 0))).json()) as any;
      const blobsBefore = (await blobsOf()).length;
      const writes = Array.from({ length: 8 }, (_, i) => patternBytes(20_000 + i * 1000, i + 1));
      const answers = await Promise.all(writes.map((w) => put('safety', 'raced', w)));
      for (const a of answers) expect(a.status).toBe(200);
      const rows = await Promise.all(answers.map((a) => a.json() as Promise<any>));
      for (const row of rows) expect(row.id).toBe(first.id);

      const listed = (await list('safety')).objects.filter((o: any) => o.key === 'raced');
      expect(listed).toHaveLength(1);
      const final = listed[0];
      expect(final.id).toBe(first.id);
      const { r, bytes } = await getBytes('safety', 'raced');
      expect(r.headers.get('etag')).toBe(`"${final.etag}"`);
      expect(bytes.byteLength).toBe(final.size);
      // The bytes are exactly one of the writes, and the row's etag is that write's.
      const winner = writes.find((w) => w.byteLength === bytes.byteLength)!;
      expect(bytes).toEqual(winner);
      if (backend === 'fs') expect(final.etag).toBe(sha256(winner));
      else expect(final.etag).toBe(md5(winner));
      // Every replaced blob was deleted: the key still owns exactly one blob.
      expect((await blobsOf()).length).toBe(blobsBefore);
    });

    it('concurrent first PUTs of a new key agree on one id', async () => {
      const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => put('safety', 'fresh-race', patternBytes(1000, i))));
      const rows = await Promise.all(answers.map((a) => a.json() as Promise<any>));
      expect(new Set(rows.map((r) => r.id)).size).toBe(1);
      expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
      expect(answers.filter((a) => a.status === 200)).toHaveLength(5);
    });
  });

  describe('a PUT writing its blob beside the catalog reads', () => {
    beforeAll(async () => {
      await makeBucket('early');
      expect((await put('early', 'warm', patternBytes(10))).status).toBe(201);
    });

    /**
     * An app of its own whose isolate has served the caller's project once (so it remembers the
     * owner and, on fs, the live agent), with its clock held so the remembered agent stays fresh.
     */
    async function warmApp(fault?: { armed: boolean }) {
      const deps = buildDeps(svc.env, () => {});
      const at = Date.now();
      const db: Db = !fault
        ? deps.db
        : {
            ...deps.db,
            // The catalog read (joined to the session's, shared/db/client.ts batchGetItems) goes over the wire.
            wire: (operation, input) => {
              if (fault.armed && operation === 'BatchGetItem') return Promise.reject(new Error('injected: the catalog read failed'));
              return deps.db.wire(operation, input);
            },
          };
      const app = createApp({ ...deps, db, now: () => at });
      const call = (method: string, path: string, body?: BodyInit | null, t = token) =>
        app.fetch(
          new Request(`http://svc.test${path}`, {
            method,
            headers: { authorization: `Bearer ${t}` },
            body: body ?? undefined,
            ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
          } as RequestInit),
          exec,
        );
      const warm = await call('GET', objectUrl('early', 'warm'));
      expect(warm.status).toBe(200);
      await warm.arrayBuffer();
      return { call };
    }

    /** A body whose last chunk is held back until `release()`. */
    function heldBody(bytes: Uint8Array) {
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let sent = false;
      const body = new ReadableStream<Uint8Array>({
        async pull(c) {
          if (!sent) {
            sent = true;
            c.enqueue(bytes.slice(0, bytes.byteLength - 1));
            return;
          }
          await released;
          c.enqueue(bytes.slice(bytes.byteLength - 1));
          c.close();
        },
      });
      return { body, release };
    }

    const pending = (p: Promise<unknown>, ms: number) =>
      Promise.race([p.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), ms))]);

    it("stores the bytes as any PUT does, and the owner's second PUT replaces them", async () => {
      const { call } = await warmApp();
      const a = await call('PUT', objectUrl('early', 'obj'), patternBytes(3000, 1));
      expect(a.status).toBe(201);
      const b = await call('PUT', objectUrl('early', 'obj'), patternBytes(2000, 2));
      expect(b.status).toBe(200);
      expect(((await b.json()) as any).id).toBe(((await a.json()) as any).id);
      expect((await getBytes('early', 'obj')).bytes).toEqual(patternBytes(2000, 2));
    });

    it('a PUT to a bucket that does not exist takes the body in, then answers 404 and leaves no blob', async () => {
      const { call } = await warmApp();
      const before = await blobsOf();
      const { body, release } = heldBody(patternBytes(200_000, 3));
      const answer = call('PUT', objectUrl('no-such-bucket', 'x'), body);
      // The write started beside the reads: no answer while the body is still coming.
      expect(await pending(answer, 300)).toBe(true);
      release();
      const r = await answer;
      expect(r.status).toBe(404);
      expect(((await r.json()) as any).error.message).toMatch(/bucket no-such-bucket/);
      expect(await blobsOf()).toEqual(before);
      if (backend === 'fs') expect(fsTempFiles()).toEqual([]);
    });

    it("a stranger's PUT never starts a write: its 404 comes while its body is still coming", async () => {
      const { call } = await warmApp();
      const stranger = (await signup(svc)).token;
      const before = await blobsOf();
      const { body, release } = heldBody(patternBytes(200_000, 4));
      const answer = call('PUT', objectUrl('early', 'obj'), body, stranger);
      expect(await pending(answer, 3000)).toBe(false);
      const r = await answer;
      expect(r.status).toBe(404);
      release();
      await r.arrayBuffer();
      expect(await blobsOf()).toEqual(before);
    });

    it('when the catalog read fails while the blob is written, the row stands and the new blob is removed', async () => {
      const fault = { armed: false };
      const { call } = await warmApp(fault);
      const original = patternBytes(700, 5);
      expect((await call('PUT', objectUrl('early', 'kept'), original)).status).toBe(201);
      const before = await blobsOf();
      fault.armed = true;
      const r = await call('PUT', objectUrl('early', 'kept'), patternBytes(900, 6));
      fault.armed = false;
      expect(r.status).toBe(500);
      expect(await blobsOf()).toEqual(before);
      expect((await getBytes('early', 'kept')).bytes).toEqual(original);
    });
  });

  describe('access', () => {
    it('answers 401 without a session and 404 for a project the caller does not own', async () => {
      await makeBucket('private');
      await put('private', 'secret.txt', patternBytes(4));
      const anon = await send('GET', objectUrl('private', 'secret.txt'), { t: null });
      expect(anon.status).toBe(401);
      expect(anon.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
      const stranger = (await signup(svc)).token;
      for (const [method, path, body] of [
        ['GET', objectUrl('private', 'secret.txt'), undefined],
        ['PUT', objectUrl('private', 'secret.txt'), patternBytes(1)],
        ['GET', `${base()}/objects?bucket=private`, undefined],
        ['GET', `${base()}/buckets`, undefined],
        ['PUT', `${base()}/buckets/private`, undefined],
      ] as const) {
        const r = await send(method, path, { t: stranger, body });
        expect(r.status, `${method} ${path}`).toBe(404);
      }
      const d = await sendJson('DELETE', `${base()}/objects`, { bucket: 'private', key: 'secret.txt' }, stranger);
      expect(d.status).toBe(404);
      expect((await getBytes('private', 'secret.txt')).bytes).toEqual(patternBytes(4));
    });
  });
});
