/**
 * Managing storage as S3, R2 and Supabase users do (docs/storage.md "Deleting a bucket", "Listing by
 * prefix and delimiter", "Conditional requests", "Signed URLs"), on both blob backends: deleting
 * buckets (refused while not empty, forced, cut short by a crash at several points and finished by
 * the next DELETE, raced by PUTs), deleting an object by its path, prefix and delimiter listings,
 * conditional PUTs and their races, If-Modified-Since and If-Range, and signed download URLs. Real
 * DynamoDB Local, a real host agent, real s3rver; the only injected fault is a DynamoDB client that
 * stops answering at a chosen point, as a crashed handler would.
 */
import { QueryCommand, TransactWriteCommand, DeleteCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildDeps } from '../../handlers/deps.ts';
import { createApp, type App } from '../../handlers/index.ts';
import type { Db } from '../../shared/db/client.ts';
import { patternBytes } from '../helpers/bytes.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { storageDriver, type SendInit, type StorageDriver } from '../helpers/storage.ts';
import { s3TestSettings } from '../setup/s3rver.ts';

/** The items of a project's partition whose sort key starts with `prefix`. */
async function itemsOf(db: Db, projectId: string, prefix: string): Promise<Record<string, any>[]> {
  const out = await db.doc.send(
    new QueryCommand({
      TableName: db.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)',
      ExpressionAttributeValues: { ':pk': `PRJ#${projectId}`, ':p': prefix },
      ConsistentRead: true,
    }),
  );
  return out.Items ?? [];
}

/** The name of a blob as its store lists it (fs `aa/<name>`, s3 `blobs/<prj>/<name>`). */
const blobName = (listed: string) => listed.slice(listed.lastIndexOf('/') + 1);

describe.each(['fs', 's3'] as const)('managing storage on the %s backend', (backend) => {
  let svc: TestService;
  let token: string;
  let accountId: string;
  let prj: string;
  const s: StorageDriver = storageDriver(() => svc, () => ({ token, projectId: prj }), backend);
  const { send, sendJson, base, objectUrl } = s;

  async function newProject(name: string): Promise<string> {
    const r = await svc.request('POST', '/v0/projects', { token, body: { name } });
    return ((await r.json()) as { id: string }).id;
  }

  async function makeBucket(name: string, projectId = prj) {
    const r = await send('PUT', `/v0/projects/${projectId}/storage/buckets/${name}`);
    expect([200, 201]).toContain(r.status);
  }

  async function put(bucket: string, key: string, bytes: Uint8Array, headers: Record<string, string> = {}, projectId = prj) {
    const path = `/v0/projects/${projectId}/storage/objects/${bucket}/${key.split('/').map(encodeURIComponent).join('/')}`;
    return send('PUT', path, { body: bytes, headers: { 'content-length': String(bytes.byteLength), ...headers } });
  }

  async function receiptsOf(projectId = prj): Promise<any[]> {
    const r = await send('GET', `/v0/projects/${projectId}/receipts?limit=1000`);
    return ((await r.json()) as { receipts: any[] }).receipts;
  }

  const errorOf = async (r: Response) => ((await r.json()) as { error: { code: string; message: string } }).error;

  beforeAll(async () => {
    svc = await startTestService(backend === 's3' ? s3TestSettings(inject('s3Endpoint')) : {});
    ({ token, accountId } = await signup(svc));
    prj = await newProject(`manage-${backend}`);
  });
  afterAll(() => svc?.stop());

  describe('who may call the new routes', () => {
    it('another account gets 404, a project key 401, no credential 401, and nothing changes', async () => {
      await makeBucket('guarded');
      await put('guarded', 'dir/a.txt', patternBytes(5));
      const stranger = (await signup(svc)).token;
      const keyAnswer = await svc.request('POST', `/v0/projects/${prj}/keys`, { token, body: {} });
      const projectKey = ((await keyAnswer.json()) as { key: string }).key;
      const calls: [string, string, unknown][] = [
        ['DELETE', `${base()}/buckets/guarded?force=true`, undefined],
        ['DELETE', objectUrl('guarded', 'dir/a.txt'), undefined],
        ['GET', `${base()}/objects?bucket=guarded&prefix=dir/&delimiter=/`, undefined],
        ['POST', `${base()}/downloads`, { bucket: 'guarded', key: 'dir/a.txt', signed: true }],
        ['PUT', `${objectUrl('guarded', 'dir/a.txt')}`, 'conditional'],
      ];
      for (const [method, path, body] of calls) {
        const init = (t: string | null): SendInit =>
          body === 'conditional'
            ? { t, body: patternBytes(1), headers: { 'if-none-match': '*' } }
            : body === undefined
              ? { t }
              : { t, body: JSON.stringify(body), headers: { 'content-type': 'application/json' } };
        expect((await send(method, path, init(stranger))).status, `${method} ${path} by another account`).toBe(404);
        const byKey = await send(method, path, init(projectKey));
        expect(byKey.status, `${method} ${path} by a project key`).toBe(401);
        expect(byKey.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
        expect((await send(method, path, init(null))).status, `${method} ${path} without a credential`).toBe(401);
      }
      const g = await send('GET', objectUrl('guarded', 'dir/a.txt'));
      expect(new Uint8Array(await g.arrayBuffer())).toEqual(patternBytes(5));
    });
  });

  describe('deleting a bucket', () => {
    it('deletes an empty bucket (200, the record, a bucket.delete receipt); then it is gone everywhere', async () => {
      await makeBucket('empty-one');
      const created = (await (await send('PUT', `${base()}/buckets/empty-one`)).json()) as any;
      const r = await send('DELETE', `${base()}/buckets/empty-one`);
      expect(r.status).toBe(200);
      expect(await r.json()).toEqual(created);
      const names = ((await (await send('GET', `${base()}/buckets?limit=1000`)).json()) as any).buckets.map((b: any) => b.name);
      expect(names).not.toContain('empty-one');
      expect((await send('DELETE', `${base()}/buckets/empty-one`)).status).toBe(404);
      expect((await put('empty-one', 'x', patternBytes(1))).status).toBe(404);
      expect((await send('GET', `${base()}/objects?bucket=empty-one`)).status).toBe(404);
      const receipt = (await receiptsOf()).find((x) => x.op === 'bucket.delete' && x.target === 'empty-one');
      expect(receipt).toMatchObject({ project: prj, actor: accountId, request_id: r.headers.get('x-request-id') });
      // A bucket of that name can be made again, empty.
      expect((await send('PUT', `${base()}/buckets/empty-one`)).status).toBe(201);
    });

    it('refuses a bucket that holds objects, stored or pending, with 409, and keeps everything', async () => {
      await makeBucket('full-one');
      await put('full-one', 'kept', patternBytes(10));
      const r = await send('DELETE', `${base()}/buckets/full-one`);
      expect(r.status).toBe(409);
      expect(await errorOf(r)).toMatchObject({ code: 'conflict', message: expect.stringMatching(/not empty.*force=true/) });
      expect((await send('GET', objectUrl('full-one', 'kept'))).status).toBe(200);
      // Not marked: writes go on as before.
      expect((await put('full-one', 'after', patternBytes(3))).status).toBe(201);

      await makeBucket('pending-one');
      expect((await sendJson('POST', `${base()}/uploads`, { bucket: 'pending-one', key: 'later' })).status).toBe(201);
      expect((await send('DELETE', `${base()}/buckets/pending-one`)).status).toBe(409);
      expect((await send('DELETE', `${base()}/buckets/pending-one?force=false`)).status).toBe(409);
    });

    it('?force=true deletes every object (one object.delete receipt each, blobs gone), then the bucket', async () => {
      const project = await newProject('force');
      await makeBucket('forced', project);
      const keys = ['a', 'b/c', 'b/d', 'long/'.repeat(200) + 'x', 'é 日 😀'];
      for (const [i, key] of keys.entries()) expect((await put('forced', key, patternBytes(100 + i, i), {}, project)).status).toBe(201);
      await put('forced', 'a', patternBytes(7, 9), {}, project); // a replace: its old blob goes after the answer
      expect((await sendJson('POST', `/v0/projects/${project}/storage/uploads`, { bucket: 'forced', key: 'pending' })).status).toBe(201);
      expect(await s.blobsOf(project)).toHaveLength(keys.length);

      const r = await send('DELETE', `/v0/projects/${project}/storage/buckets/forced?force=true`);
      expect(r.status).toBe(200);
      expect(await r.json()).toMatchObject({ project, name: 'forced' });
      expect(await s.blobsOf(project)).toEqual([]);
      expect(await itemsOf(svc.db, project, 'OBJ#forced#')).toEqual([]);
      expect(await itemsOf(svc.db, project, 'BLOBDEL#')).toEqual([]);
      const receipts = (await receiptsOf(project)).filter((x) => x.request_id === r.headers.get('x-request-id'));
      expect(receipts.filter((x) => x.op === 'object.delete').map((x) => x.target).sort()).toEqual([...keys, 'pending'].map((k) => `forced/${k}`).sort());
      expect(receipts.filter((x) => x.op === 'bucket.delete').map((x) => x.target)).toEqual(['forced']);
    });

    it('refuses a bad force value and a body with 400, an unknown bucket with 404', async () => {
      await makeBucket('strict-one');
      for (const q of ['force=yes', 'force=1', 'force=', 'force=true&force=true', 'other=1']) {
        const r = await send('DELETE', `${base()}/buckets/strict-one?${q}`);
        expect(r.status, q).toBe(400);
        expect((await errorOf(r)).code).toBe('invalid_request');
      }
      expect((await send('DELETE', `${base()}/buckets/strict-one`, { body: '{}', headers: { 'content-type': 'application/json' } })).status).toBe(400);
      expect((await send('DELETE', `${base()}/buckets/no-such-bucket`)).status).toBe(404);
      expect((await send('DELETE', `${base()}/buckets/UPPER`)).status).toBe(400);
    });

    /**
     * A deps whose DynamoDB stops answering for good at a chosen point, as a handler that crashed
     * there would: `crashAfter(n)` lets the n-th row removal commit and then fails everything;
     * `crashBefore(n, kind)` fails the n-th call of that kind and everything after it.
     */
    function crashingApp(point: { after?: number; beforeForget?: number; beforeBucket?: true }): App {
      const deps = buildDeps(svc.env, () => {});
      let removals = 0;
      let forgets = 0;
      let dead = false;
      const faulty: Db = {
        ...deps.db,
        wire: async (operation, input) => {
          if (dead) throw new Error('injected: the handler is gone');
          return deps.db.wire(operation, input);
        },
        doc: new Proxy(deps.db.doc, {
          get(target, prop, receiver) {
            if (prop !== 'send') return Reflect.get(target, prop, receiver);
            return async (command: any, ...rest: unknown[]) => {
              if (dead) throw new Error('injected: the handler is gone');
              const items: any[] = command instanceof TransactWriteCommand ? (command.input.TransactItems ?? []) : [];
              const removal = items.some((i) => i.Put?.Item?.type === 'blob-deletion');
              if (command instanceof DeleteCommand && String(command.input.Key?.sk).startsWith('BLOBDEL#') && ++forgets === point.beforeForget) dead = true;
              if (point.beforeBucket && items.some((i) => String(i.Delete?.Key?.sk ?? '').startsWith('BKT#'))) dead = true;
              if (dead) throw new Error('injected: the handler is gone');
              const out = await (target.send as (...a: unknown[]) => Promise<unknown>).call(target, command, ...rest);
              if (removal && ++removals === point.after) dead = true;
              return out;
            };
          },
        }),
      };
      return createApp({ ...deps, db: faulty });
    }

    /** Every blob is named by a row or a blob-deletion record, and every row's blob is in the store. */
    async function expectNothingLost(project: string): Promise<void> {
      const stored = new Set((await s.blobsOf(project)).map(blobName));
      const rows = await itemsOf(svc.db, project, 'OBJ#');
      const records = await itemsOf(svc.db, project, 'BLOBDEL#');
      for (const row of rows) if (row.blob) expect(stored.has(row.blob), `the bytes of ${row.key}`).toBe(true);
      const named = new Set([...rows.map((r) => r.blob), ...records.map((r) => r.blob)].filter(Boolean));
      for (const blob of stored) expect(named.has(blob), `blob ${blob} is named`).toBe(true);
    }

    for (const [label, point] of [
      ['right after the first row removal commits', { after: 1 }],
      ['right after the third row removal commits', { after: 3 }],
      ['before the second blob-deletion record is forgotten', { beforeForget: 2 }],
      ['before the bucket itself is removed', { beforeBucket: true as const }],
    ] as const) {
      it(`a crash ${label} leaves every blob named and no row without bytes; the next DELETE finishes`, async () => {
        const project = await newProject('crash');
        await makeBucket('doomed', project);
        await makeBucket('bystander', project);
        const keys = ['k1', 'k2', 'k3', 'k4', 'dir/k5', 'dir/k6'];
        for (const [i, key] of keys.entries()) expect((await put('doomed', key, patternBytes(50 + i, i), {}, project)).status).toBe(201);
        await put('bystander', 'safe', patternBytes(9), {}, project);

        const crashed = await crashingApp(point).fetch(
          new Request(`http://svc.test/v0/projects/${project}/storage/buckets/doomed?force=true`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } }),
        );
        expect(crashed.status).toBe(500);
        await expectNothingLost(project);
        // Still there, marked: it takes no new object, and what is left reads as before.
        expect((await put('doomed', 'new-after-crash', patternBytes(2), {}, project)).status).toBe(409);
        expect((await send('PUT', `/v0/projects/${project}/storage/buckets/doomed`)).status).toBe(409);
        const left = ((await (await send('GET', `/v0/projects/${project}/storage/objects?bucket=doomed`)).json()) as any).objects;
        for (const row of left) {
          const g = await send('GET', `/v0/projects/${project}/storage/objects/doomed/${row.key}`);
          expect(g.status, row.key).toBe(200);
          await g.arrayBuffer();
        }
        // A DELETE without force finishes only an empty bucket.
        if (left.length > 0) expect((await send('DELETE', `/v0/projects/${project}/storage/buckets/doomed`)).status).toBe(409);

        const r = await send('DELETE', `/v0/projects/${project}/storage/buckets/doomed?force=true`);
        expect(r.status).toBe(200);
        await expectNothingLost(project);
        expect(await itemsOf(svc.db, project, 'OBJ#doomed#')).toEqual([]);
        expect(await itemsOf(svc.db, project, 'BLOBDEL#')).toEqual([]);
        expect((await s.blobsOf(project)).map(blobName)).toEqual([(await itemsOf(svc.db, project, 'OBJ#bystander#'))[0]!.blob]);
        const receipts = await receiptsOf(project);
        // Each object was receipted exactly once, by whichever DELETE removed its row.
        expect(receipts.filter((x) => x.op === 'object.delete').map((x) => x.target).sort()).toEqual(keys.map((k) => `doomed/${k}`).sort());
        expect(receipts.filter((x) => x.op === 'bucket.delete')).toHaveLength(1);
      });
    }

    it('PUTs racing a forced delete leave no object, row or blob in the deleted bucket', async () => {
      const project = await newProject('race');
      await makeBucket('contested', project);
      // s3rver removes a key "directory" its last delete left empty, and a PutObject into it at that
      // moment crashes s3rver (ENOENT): an object elsewhere in the project keeps the directory.
      await makeBucket('bystander', project);
      await put('bystander', 'keeps-the-prefix', patternBytes(9), {}, project);
      for (let i = 0; i < 12; i++) await put('contested', `old-${i}`, patternBytes(30, i), {}, project);
      const deleting = send('DELETE', `/v0/projects/${project}/storage/buckets/contested?force=true`);
      const statuses: number[] = [];
      const writers = Array.from({ length: 3 }, async (_, w) => {
        for (let i = 0; i < 8; i++) {
          const key = i % 2 === 0 ? `new-${w}-${i}` : `old-${(w * 8 + i) % 12}`;
          const r = await put('contested', key, patternBytes(40, w * 10 + i), {}, project);
          statuses.push(r.status);
          await r.arrayBuffer();
        }
      });
      const [d] = await Promise.all([deleting, ...writers]);
      expect(d.status).toBe(200);
      for (const status of statuses) expect([200, 201, 404, 409]).toContain(status);
      expect(await itemsOf(svc.db, project, 'OBJ#contested#')).toEqual([]);
      expect(await itemsOf(svc.db, project, 'BLOBDEL#')).toEqual([]);
      expect((await s.blobsOf(project)).map(blobName)).toEqual([(await itemsOf(svc.db, project, 'OBJ#bystander#'))[0]!.blob]);
      // Made again, it is empty.
      expect((await send('PUT', `/v0/projects/${project}/storage/buckets/contested`)).status).toBe(201);
      expect(((await (await send('GET', `/v0/projects/${project}/storage/objects?bucket=contested`)).json()) as any).objects).toEqual([]);
    });
  });

  describe('deleting an object by its path', () => {
    beforeAll(() => makeBucket('by-path'));

    it('answers what the body form answers: the removed row, receipted; then 404', async () => {
      for (const key of ['plain.txt', 'dir/sub/a b?#%.bin', 'é/😀']) {
        const row = await (await put('by-path', key, patternBytes(20))).json();
        const r = await send('DELETE', objectUrl('by-path', key));
        expect(r.status, key).toBe(200);
        expect(await r.json()).toEqual(row);
        expect((await send('GET', objectUrl('by-path', key))).status).toBe(404);
        expect((await send('DELETE', objectUrl('by-path', key))).status).toBe(404);
        const receipt = (await receiptsOf()).find((x) => x.request_id === r.headers.get('x-request-id'));
        expect(receipt).toMatchObject({ op: 'object.delete', target: `by-path/${key}`, actor: accountId });
      }
    });

    it('reaches the same key as the body form, `/` encoded or not', async () => {
      const row = await (await put('by-path', 'x/y', patternBytes(4))).json();
      const r = await send('DELETE', `${base()}/objects/by-path/x%2Fy`);
      expect(await r.json()).toEqual(row);
      await put('by-path', 'x/y', patternBytes(4));
      expect((await sendJson('DELETE', `${base()}/objects`, { bucket: 'by-path', key: 'x/y' })).status).toBe(200);
    });

    it('refuses a missing key, a query or a body with 400, and an unknown bucket with 404', async () => {
      await put('by-path', 'stays', patternBytes(4));
      expect((await send('DELETE', `${base()}/objects/by-path`)).status).toBe(400);
      expect((await send('DELETE', `${objectUrl('by-path', 'stays')}?force=true`)).status).toBe(400);
      expect((await send('DELETE', objectUrl('by-path', 'stays'), { body: '{}', headers: { 'content-type': 'application/json' } })).status).toBe(400);
      expect((await send('DELETE', objectUrl('no-such-bucket', 'stays'))).status).toBe(404);
      expect((await send('GET', objectUrl('by-path', 'stays'))).status).toBe(200);
    });
  });

  describe('listing by prefix and delimiter', () => {
    const keys = ['a.txt', 'photos/2024/x.jpg', 'photos/2024/y.jpg', 'photos/2025/z.jpg', 'photos/top.jpg', 'photos/', 'videos/v.mp4', 'zeta'];
    beforeAll(async () => {
      await makeBucket('tree');
      for (const key of keys) await put('tree', key, patternBytes(3));
    });

    const list = async (query: string) => {
      const r = await send('GET', `${base()}/objects?bucket=tree${query}`);
      expect(r.status, query).toBe(200);
      return (await r.json()) as { objects: any[]; common_prefixes: string[]; next_cursor: string | null; bucket: string };
    };

    it('rolls keys up into common prefixes at the delimiter, after the prefix', async () => {
      const top = await list('&delimiter=/');
      expect(top.objects.map((o) => o.key)).toEqual(['a.txt', 'zeta']);
      expect(top.common_prefixes).toEqual(['photos/', 'videos/']);
      const photos = await list('&prefix=photos/&delimiter=/');
      expect(photos.objects.map((o) => o.key)).toEqual(['photos/', 'photos/top.jpg']);
      expect(photos.common_prefixes).toEqual(['photos/2024/', 'photos/2025/']);
      const under = await list(`&prefix=${encodeURIComponent('photos/2024/')}`);
      expect(under.objects.map((o) => o.key)).toEqual(['photos/2024/x.jpg', 'photos/2024/y.jpg']);
      expect(under.common_prefixes).toEqual([]);
      expect((await list('&prefix=nothing')).objects).toEqual([]);
      expect((await list('')).objects.map((o) => o.key)).toEqual([...keys].sort());
      expect((await list('&prefix=')).objects).toHaveLength(keys.length);
    });

    it('pages through objects and prefixes together, `limit` entries a page, with a cursor bound to the listing', async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      let first: string | null = null;
      do {
        const page = await list(`&delimiter=/&limit=1${cursor ? `&cursor=${cursor}` : ''}`);
        expect(page.objects.length + page.common_prefixes.length).toBe(1);
        seen.push(...page.objects.map((o) => o.key), ...page.common_prefixes);
        cursor = page.next_cursor;
        first ??= cursor;
      } while (cursor);
      expect(seen).toEqual(['a.txt', 'photos/', 'videos/', 'zeta']);
      // A cursor of one listing does not open another (other prefix or delimiter).
      const r = await send('GET', `${base()}/objects?bucket=tree&limit=1&cursor=${first}`);
      expect(r.status).toBe(400);
      expect((await errorOf(r)).message).toBe('cursor: is not valid');
    });

    it('refuses an empty or overlong delimiter, an overlong prefix, and either given twice, with 400 naming it', async () => {
      for (const [q, field] of [
        ['&delimiter=', 'delimiter'],
        [`&delimiter=${'x'.repeat(1025)}`, 'delimiter'],
        [`&prefix=${'x'.repeat(1025)}`, 'prefix'],
        ['&prefix=a&prefix=b', 'prefix'],
        ['&delimiter=/&delimiter=/', 'delimiter'],
      ] as const) {
        const r = await send('GET', `${base()}/objects?bucket=tree${q}`);
        expect(r.status, q).toBe(400);
        expect((await errorOf(r)).message, q).toMatch(new RegExp(`^${field}: `));
      }
    });
  });

  describe('conditional requests', () => {
    beforeAll(() => makeBucket('cond'));

    it('If-None-Match: * creates only: 201, then 409 with the bytes unchanged', async () => {
      const a = await put('cond', 'create-only', patternBytes(10, 1), { 'if-none-match': '*' });
      expect(a.status).toBe(201);
      const b = await put('cond', 'create-only', patternBytes(10, 2), { 'if-none-match': '*' });
      expect(b.status).toBe(409);
      expect(await errorOf(b)).toMatchObject({ code: 'conflict', message: expect.stringMatching(/^precondition failed: .*If-None-Match/) });
      expect(new Uint8Array(await (await send('GET', objectUrl('cond', 'create-only'))).arrayBuffer())).toEqual(patternBytes(10, 1));
      // A pending row has no bytes yet: a create-only PUT fills it.
      await sendJson('POST', `${base()}/uploads`, { bucket: 'cond', key: 'ticketed' });
      expect((await put('cond', 'ticketed', patternBytes(3), { 'if-none-match': '*' })).status).toBe(201);
    });

    it('If-Match replaces only what is unchanged; If-None-Match with an ETag refuses to overwrite it', async () => {
      const v1 = (await (await put('cond', 'cas', patternBytes(10, 1))).json()) as any;
      const v2 = await put('cond', 'cas', patternBytes(10, 2), { 'if-match': `"${v1.etag}"` });
      expect(v2.status).toBe(200);
      const row2 = (await v2.json()) as any;
      expect(row2.id).toBe(v1.id);
      const stale = await put('cond', 'cas', patternBytes(10, 3), { 'if-match': `"${v1.etag}"` });
      expect(stale.status).toBe(409);
      expect((await put('cond', 'cas', patternBytes(10, 3), { 'if-match': `W/"${row2.etag}"` })).status).toBe(409);
      expect((await put('cond', 'cas', patternBytes(10, 4), { 'if-match': `"nope", "${row2.etag}"` })).status).toBe(200);
      expect((await put('cond', 'cas', patternBytes(10, 5), { 'if-match': '*' })).status).toBe(200);
      expect((await put('cond', 'absent', patternBytes(10, 5), { 'if-match': '*' })).status).toBe(409);
      const current = (await (await send('HEAD', objectUrl('cond', 'cas'))).headers.get('etag'))!;
      expect((await put('cond', 'cas', patternBytes(10, 6), { 'if-none-match': current })).status).toBe(409);
      expect((await put('cond', 'cas', patternBytes(10, 6), { 'if-none-match': '"other"' })).status).toBe(200);
      expect((await send('GET', objectUrl('cond', 'absent'))).status).toBe(404);
    });

    it('refuses a malformed If-Match or If-None-Match with 400 and stores nothing', async () => {
      for (const [name, value] of [
        ['if-match', 'abc'],
        ['if-none-match', 'W/abc'],
        ['if-match', '"a", *'],
      ] as const) {
        const r = await put('cond', 'malformed', patternBytes(3), { [name]: value });
        expect(r.status, `${name}: ${value}`).toBe(400);
        expect((await errorOf(r)).message).toMatch(new RegExp(`^${name}: `));
      }
      expect((await send('GET', objectUrl('cond', 'malformed'))).status).toBe(404);
    });

    it('two create-only PUTs at once: exactly one 201 and one 409, the winner\'s bytes stored, no blob left over', async () => {
      const project = await newProject('cond-race');
      await makeBucket('race', project);
      for (let round = 0; round < 4; round++) {
        const key = `once-${round}`;
        const bodies = [patternBytes(5000, round * 2 + 1), patternBytes(6000, round * 2 + 2)];
        const answers = await Promise.all(bodies.map((b) => put('race', key, b, { 'if-none-match': '*' }, project)));
        expect(answers.map((r) => r.status).sort()).toEqual([201, 409]);
        const winner = answers.findIndex((r) => r.status === 201);
        const row = (await answers[winner]!.json()) as any;
        const g = await send('GET', `/v0/projects/${project}/storage/objects/race/${key}`);
        expect(g.headers.get('etag')).toBe(`"${row.etag}"`);
        expect(new Uint8Array(await g.arrayBuffer())).toEqual(bodies[winner]);
      }
      expect(await s.blobsOf(project)).toHaveLength(4);
      expect((await receiptsOf(project)).filter((x) => x.op === 'object.put')).toHaveLength(4);
    });

    it('If-Modified-Since answers 304 unless the object changed after it; If-Range answers the whole object unless it matches', async () => {
      await put('cond', 'dated', patternBytes(100, 7));
      const head = await send('HEAD', objectUrl('cond', 'dated'));
      const lastModified = head.headers.get('last-modified')!;
      const etag = head.headers.get('etag')!;
      const earlier = new Date(Date.parse(lastModified) - 60_000).toUTCString();
      const ims = await send('GET', objectUrl('cond', 'dated'), { headers: { 'if-modified-since': lastModified } });
      expect(ims.status).toBe(304);
      expect(ims.headers.get('etag')).toBe(etag);
      expect(await ims.text()).toBe('');
      expect((await send('HEAD', objectUrl('cond', 'dated'), { headers: { 'if-modified-since': lastModified } })).status).toBe(304);
      const changed = await send('GET', objectUrl('cond', 'dated'), { headers: { 'if-modified-since': earlier } });
      expect(changed.status).toBe(200);
      expect((await changed.arrayBuffer()).byteLength).toBe(100);
      expect((await send('GET', objectUrl('cond', 'dated'), { headers: { 'if-modified-since': 'garbage' } })).status).toBe(200);
      // If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2).
      expect((await send('GET', objectUrl('cond', 'dated'), { headers: { 'if-modified-since': lastModified, 'if-none-match': '"other"' } })).status).toBe(200);

      const ranged = (h: Record<string, string>) => send('GET', objectUrl('cond', 'dated'), { headers: { range: 'bytes=0-9', ...h } });
      const same = await ranged({ 'if-range': etag });
      expect(same.status).toBe(206);
      expect((await same.arrayBuffer()).byteLength).toBe(10);
      expect((await ranged({ 'if-range': lastModified })).status).toBe(206);
      for (const stale of ['"not-the-etag"', `W/${etag}`, earlier]) {
        const whole = await ranged({ 'if-range': stale });
        expect(whole.status, stale).toBe(200);
        expect(whole.headers.get('content-range')).toBeNull();
        expect(new Uint8Array(await whole.arrayBuffer())).toEqual(patternBytes(100, 7));
      }
    });
  });

  describe('signed download URLs', () => {
    beforeAll(async () => {
      await makeBucket('shared');
      await put('shared', 'docs/report 1.pdf', patternBytes(300, 4), { 'content-type': 'application/pdf' });
    });

    const ticket = async (body: Record<string, unknown>) => {
      const r = await sendJson('POST', `${base()}/downloads`, { bucket: 'shared', key: 'docs/report 1.pdf', ...body });
      return { r, t: r.status === 200 ? ((await r.json()) as Record<string, any>) : null };
    };

    it('a ticket with signed: true carries a URL that reads the object without a session until it expires', async () => {
      const before = Date.now();
      const { r, t } = await ticket({ signed: true, expires_in: 600 });
      expect(r.status).toBe(200);
      expect(t!.download_url).toBe(`/v0/projects/${prj}/storage/objects/shared/docs/report%201.pdf`);
      expect(t!.signed_url).toMatch(new RegExp(`^${t!.download_url.replace(/[.?]/g, '\\$&')}\\?expires=\\d+&signature=[A-Za-z0-9_-]{43}$`));
      const expires = Number(new URL(t!.signed_url, 'http://x').searchParams.get('expires'));
      expect(Date.parse(t!.expires_at)).toBe(expires * 1000);
      expect(expires * 1000 - before).toBeGreaterThan(598_000);
      expect(expires * 1000 - before).toBeLessThanOrEqual(601_000);

      const g = await send('GET', t!.signed_url, { t: null });
      expect(g.status).toBe(200);
      expect(g.headers.get('content-type')).toBe('application/pdf');
      expect(new Uint8Array(await g.arrayBuffer())).toEqual(patternBytes(300, 4));
      const h = await send('HEAD', t!.signed_url, { t: null });
      expect(h.status).toBe(200);
      expect(h.headers.get('content-length')).toBe('300');
      const part = await send('GET', t!.signed_url, { t: null, headers: { range: 'bytes=10-19' } });
      expect(part.status).toBe(206);
      expect(new Uint8Array(await part.arrayBuffer())).toEqual(patternBytes(300, 4).slice(10, 20));
    });

    it('the unsigned ticket stays as it was: no signed_url, the session needed', async () => {
      const { t } = await ticket({});
      expect(t).not.toHaveProperty('signed_url');
      expect((await send('GET', t!.download_url, { t: null })).status).toBe(401);
      expect((await ticket({ signed: false })).t).not.toHaveProperty('signed_url');
    });

    it('is refused (401) after its expiry', async () => {
      const { t } = await ticket({ signed: true, expires_in: 2 });
      expect((await send('GET', t!.signed_url, { t: null })).status).toBe(200);
      await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(t!.expires_at) - Date.now()) + 50));
      const late = await send('GET', t!.signed_url, { t: null });
      expect(late.status).toBe(401);
      expect(late.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
      expect((await errorOf(late)).message).toMatch(/expired/);
    });

    it('is refused (401) with one byte of the signature, the expiry or the path changed', async () => {
      const { t } = await ticket({ signed: true, expires_in: 600 });
      const url = new URL(t!.signed_url, 'http://svc.test');
      const signature = url.searchParams.get('signature')!;
      const expires = url.searchParams.get('expires')!;
      const path = url.pathname;
      const swap = (text: string, i: number, c: string) => text.slice(0, i) + c + text.slice(i + 1);
      const variants = [
        `${path}?expires=${expires}&signature=${swap(signature, 0, signature[0] === 'A' ? 'B' : 'A')}`,
        `${path}?expires=${expires}&signature=${swap(signature, 42, signature[42] === 'A' ? 'B' : 'A')}`,
        `${path}?expires=${swap(expires, expires.length - 1, expires.endsWith('9') ? '8' : '9')}&signature=${signature}`,
        `${swap(path, path.length - 1, 'g')}?expires=${expires}&signature=${signature}`,
        `${path.replace('/shared/', '/sharee/')}?expires=${expires}&signature=${signature}`,
        `${path}?expires=${expires}`,
        `${path}?signature=${signature}`,
        `${path}?expires=${expires}&signature=${signature}&signature=${signature}`,
      ];
      for (const v of variants) expect((await send('GET', v, { t: null })).status, v).toBe(401);
      // With a session as well it is two credentials: 401 too.
      expect((await send('GET', t!.signed_url)).status).toBe(401);
      // Another query parameter beside it is not part of any signed URL: 400.
      expect((await send('GET', `${t!.signed_url}&x=1`, { t: null })).status).toBe(400);
      expect((await send('GET', t!.signed_url, { t: null })).status).toBe(200);
    });

    it('refuses expires_in past the setting or without signed: true with 400, and answers 404 once the object is gone', async () => {
      const tooLong = await ticket({ signed: true, expires_in: 7 * 24 * 3600 + 1 });
      expect(tooLong.r.status).toBe(400);
      expect((await errorOf(tooLong.r)).message).toMatch(/^expires_in: must be at most 604800 seconds/);
      const unsigned = await ticket({ expires_in: 60 });
      expect(unsigned.r.status).toBe(400);
      expect((await errorOf(unsigned.r)).message).toMatch(/^expires_in: /);
      expect((await ticket({ signed: 'yes' })).r.status).toBe(400);
      expect((await ticket({ signed: true, expires_in: 0 })).r.status).toBe(400);

      await put('shared', 'ephemeral', patternBytes(5));
      const r = await sendJson('POST', `${base()}/downloads`, { bucket: 'shared', key: 'ephemeral', signed: true });
      const t = (await r.json()) as any;
      expect((await send('GET', t.signed_url, { t: null })).status).toBe(200);
      expect((await send('DELETE', objectUrl('shared', 'ephemeral'))).status).toBe(200);
      expect((await send('GET', t.signed_url, { t: null })).status).toBe(404);
    });
  });
});

describe('a forced bucket delete with objects on both backends (a deployment moved from fs to s3)', () => {
  let svc: TestService;
  let token: string;
  let prj: string;
  let s3App: App;

  beforeAll(async () => {
    // The s3 settings are there, the backend is fs: new bytes go to the agent's files.
    svc = await startTestService({ ...s3TestSettings(inject('s3Endpoint')), SVCD_BLOB_BACKEND: 'fs' });
    ({ token } = await signup(svc));
    const r = await svc.request('POST', '/v0/projects', { token, body: { name: 'mixed' } });
    prj = ((await r.json()) as { id: string }).id;
    // The same table and agent, writing new bytes to S3 (docs/storage.md "Decisions": backends).
    s3App = createApp(buildDeps({ ...svc.env, SVCD_BLOB_BACKEND: 's3' }, () => {}));
  });
  afterAll(() => svc?.stop());

  it('deletes the bytes of every row from the store its row names', async () => {
    const onFs = storageDriver(() => svc, () => ({ token, projectId: prj }), 'fs');
    const onS3 = storageDriver(() => svc, () => ({ token, projectId: prj }), 's3', () => s3App);
    expect((await onFs.send('PUT', `${onFs.base()}/buckets/mixed`)).status).toBe(201);
    for (const [driver, keys] of [
      [onFs, ['fs-1', 'fs-2', 'dir/fs-3']],
      [onS3, ['s3-1', 'dir/s3-2']],
    ] as const) {
      for (const key of keys) expect((await driver.send('PUT', driver.objectUrl('mixed', key), { body: patternBytes(64) })).status).toBe(201);
    }
    const rows = ((await (await onFs.send('GET', `${onFs.base()}/objects?bucket=mixed`)).json()) as any).objects;
    expect(rows.map((r: any) => r.backend).sort()).toEqual(['fs', 'fs', 'fs', 's3', 's3']);
    expect(await onFs.blobsOf()).toHaveLength(3);
    expect(await onS3.blobsOf()).toHaveLength(2);

    const r = await onFs.send('DELETE', `${onFs.base()}/buckets/mixed?force=true`);
    expect(r.status).toBe(200);
    expect(await onFs.blobsOf()).toEqual([]);
    expect(await onS3.blobsOf()).toEqual([]);
    expect(await itemsOf(svc.db, prj, 'OBJ#')).toEqual([]);
  });
});
