/**
 * The SDK as it ships (dist/client/index.mjs, built by `npm test`) against the local stack, over
 * HTTP only: every route, the calls the README shows (docs/sdk.md), errors as `SvcError`s, storage
 * streamed both ways with flat memory, realtime with reconnection ending in a revoked key's 401.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { startSuiteStack } from '../helpers/stack.ts';
import { patternBytes, webStreamOf } from '../helpers/bytes.ts';
import { REPO, tempDir } from '../helpers/env.ts';
import { rssGrowth } from '../helpers/memory.ts';

type Sdk = typeof import('../../client/index.ts');
type Client = import('../../client/index.ts').SvcClient;
type Project = import('../../client/index.ts').ProjectClient;

const MiB = 1024 * 1024;
const dir = tempDir('svc-sdk-e2e-');
let stack: Stack;
let sdk: Sdk;
let svc: Client;
let project: Project;
let key: string;

beforeAll(async () => {
  sdk = (await import(pathToFileURL(join(REPO, 'dist/client/index.mjs')).href)) as Sdk;
  stack = await startSuiteStack(dir.dir, { SVCD_STORAGE_MAX_BYTES: String(64 * MiB) });
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  dir.cleanup();
});

describe('the SDK against the local stack', () => {
  it('signs up, opens a session and reads health', async () => {
    const anonymous = sdk.createClient({ baseUrl: stack.url });
    expect(await anonymous.health()).toMatchObject({ status: 'ok', agents: { live: 1 } });
    const account = await anonymous.signup({ name: 'Ada' });
    expect(account.account_id).toMatch(/^acct_[0-9a-f]{16}$/);
    const session = await anonymous.createSession({ account_id: account.account_id, account_secret: account.account_secret });
    svc = anonymous.withCredentials({ token: session.token });
    const refused = await anonymous.createSession({ account_id: account.account_id, account_secret: 'wrong' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(sdk.SvcError);
    expect(refused).toMatchObject({ status: 401, code: 'authentication_required' });
    expect((refused as { requestId: string }).requestId).toMatch(/^req_[0-9a-f]{16}$/);
  });

  it('creates, lists and reads projects', async () => {
    const created = await svc.projects.create({ name: 'my app' });
    expect(created).toMatchObject({ name: 'my app', state: 'stopped', native: { pin: '3.0.0', data_plane: '/v2' } });
    await svc.projects.create({ name: 'second' });
    const names = [];
    for await (const page of svc.projects.list({ limit: 1 })) names.push(...page.projects.map((p) => p.name));
    expect(names.sort()).toEqual(['my app', 'second']);
    expect(await svc.projects.get(created.id)).toMatchObject({ id: created.id, state: 'stopped' });
    project = svc.project(created.id);
    expect((await project.get()).id).toBe(created.id);
    await expect(svc.projects.create({ name: '' })).rejects.toMatchObject({ status: 400, code: 'invalid_request', message: expect.stringMatching(/^name: /) });
    await expect(svc.project('prj_0000000000000000').get()).rejects.toMatchObject({ status: 404, code: 'not_found' });
  });

  it('refuses SQL on a stopped tenant with tenant_not_running, then wakes it and runs SQL with a key', async () => {
    const issued = await project.keys.create({ label: 'ci' });
    key = issued.key;
    const db = sdk.createClient({ baseUrl: stack.url, key });
    await expect(db.sql('SELECT 1')).rejects.toMatchObject({ status: 409, code: 'tenant_not_running', source: 'service' });
    await expect(project.head()).rejects.toMatchObject({ status: 409, code: 'tenant_not_running' });

    expect((await project.wakeup()).state).toBe('running');
    await db.batch([
      'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)',
      { sql: 'INSERT INTO notes (body) VALUES (?), (?)', args: ['hello', 'world'] },
      'CREATE VIRTUAL TABLE docs USING fts5(title, body)',
      { sql: 'INSERT INTO docs VALUES (:t, :b)', args: { t: 'Fox', b: 'the quick brown fox' } },
    ]);
    const rs = await db.sql('SELECT id, body FROM notes ORDER BY id');
    expect(rs.columns).toEqual(['id', 'body']);
    expect(rs.rows.map((r) => r.body)).toEqual(['hello', 'world']);
    expect(rs.rows[1]![0]).toBe(2);
    const ins = await db.sql('INSERT INTO notes (body) VALUES (?)', ['again']);
    expect([ins.rowsAffected, ins.lastInsertRowid]).toEqual([1, 3n]);
    expect((await db.search('docs', 'fox'))[0]).toMatchObject({ title: 'Fox' });
    expect((await db.capabilities()).engine_version).toBe('3.0.0');
    await expect(db.sql('SELECT * FROM nope')).rejects.toMatchObject({ status: 400, code: 'sql_error', source: 'engine' });
    expect(await db.dropTable('docs')).toMatchObject({ dropped: 'docs' });

    const head = await project.head();
    expect(head).toMatchObject({ state: 'running', source: 'live_probe', protocol_minor: 3 });
    if (head.source !== 'live_probe') throw new Error('expected a live probe');
    expect(sdk.decodeEnvelope(Buffer.from(head.capabilities.body_base64, 'base64'))).toMatchObject({ engine_version: '3.0.0' });
  });

  it('snapshots a sleeping tenant and restores it', async () => {
    await expect(project.snapshots.create({ label: 'nope' })).rejects.toMatchObject({ status: 409, code: 'tenant_running' });
    expect((await project.sleep()).state).toBe('sleeping');
    const snap = await project.snapshots.create({ label: 'before' });
    expect(snap).toMatchObject({ project: project.id, label: 'before', engine_version: '3.0.0', backup: { status: 'verified' } });
    expect((await project.snapshots.list().all()).map((s) => s.id)).toEqual([snap.id]);
    // Its off-machine copy completes in the background meanwhile (docs/lifecycle.md "Off-machine copies").
    expect({ ...(await project.snapshots.get(snap.id)), offsite: null }).toEqual({ ...snap, offsite: null });
    const head = await project.head();
    expect(head).toMatchObject({ source: 'offline_status', latest_snapshot: snap.id });

    await project.wakeup();
    const db = sdk.createClient({ baseUrl: stack.url, key });
    await db.sql('DELETE FROM notes');
    await project.sleep();
    const restored = await project.restore(snap.id);
    expect(restored).toMatchObject({ state: 'sleeping', snapshot_id: snap.id, native: { restore: { status: 'restored' } } });
    await project.wakeup();
    expect((await db.sql('SELECT count(*) AS n FROM notes')).rows[0]!.n).toBe(3);
  });

  it('lists and revokes keys: the very next /v2 call with a revoked key is a 401 SvcError', async () => {
    const spare = await project.keys.create({ label: null });
    const listed = await project.keys.list().all();
    expect(listed.map((k) => k.key_id).sort()).toEqual([spare.key_id, key.slice(5, 37)].sort());
    expect(JSON.stringify(listed)).not.toContain(spare.key);
    const revoked = await project.keys.revoke(spare.key_id);
    expect(revoked.revoked_at).not.toBeNull();
    expect((await project.keys.revoke(spare.key_id)).revoked_at).toBe(revoked.revoked_at);
    await expect(sdk.createClient({ baseUrl: stack.url, key: spare.key }).sql('SELECT 1')).rejects.toMatchObject({ status: 401, code: 'authentication_required' });
  });

  it('stores objects: buckets, tickets, streamed upload and download, HEAD, ranges, pages, delete', async () => {
    expect(await project.storage.createBucket('photos')).toMatchObject({ project: project.id, name: 'photos' });
    expect((await project.storage.listBuckets().all()).map((b) => b.name)).toEqual(['photos']);

    const ticket = await project.storage.uploadTicket({ bucket: 'photos', key: 'pending.bin', content_type: 'image/png' });
    expect(ticket).toMatchObject({ method: 'PUT', upload_url: `/v0/projects/${project.id}/storage/objects/photos/pending.bin` });

    const text = await project.storage.upload('photos', 'dir/a b?#.txt', 'hello, world', { contentType: 'text/plain' });
    expect(text).toMatchObject({ key: 'dir/a b?#.txt', size: 12, content_type: 'text/plain', state: 'stored' });
    expect(text.etag).toBe(createHash('sha256').update('hello, world').digest('hex'));
    const down = await project.storage.download('photos', 'dir/a b?#.txt');
    expect(await new Response(down.body).text()).toBe('hello, world');
    // `size` is null when the answer came content-encoded (workerd compresses text): fetch decodes it.
    expect(down).toMatchObject({ status: 200, etag: text.etag, objectId: text.id, contentType: 'text/plain' });
    const range = await project.storage.download('photos', 'dir/a b?#.txt', { range: 'bytes=7-11' });
    expect([range.status, await new Response(range.body).text()]).toEqual([206, 'world']);
    expect((await project.storage.download('photos', 'dir/a b?#.txt', { ifNoneMatch: text.etag })).notModified).toBe(true);
    expect(await project.storage.head('photos', 'dir/a b?#.txt')).toMatchObject({ size: 12, etag: text.etag, objectId: text.id });

    const data = patternBytes(3 * MiB + 5, 3);
    let reported = 0;
    const streamed = await project.storage.upload('photos', 'streamed.bin', webStreamOf(data), { onProgress: ({ loaded }) => (reported = loaded) });
    expect([streamed.size, reported]).toEqual([data.byteLength, data.byteLength]);
    const dt = await project.storage.downloadTicket({ bucket: 'photos', key: 'streamed.bin' });
    expect(dt).toMatchObject({ method: 'GET', object: { id: streamed.id, size: data.byteLength } });

    const keys = [];
    for await (const row of project.storage.list('photos', { limit: 1 }).items()) keys.push(row.key);
    expect(keys).toEqual(['dir/a b?#.txt', 'pending.bin', 'streamed.bin']);
    expect(await project.storage.delete('photos', 'streamed.bin')).toMatchObject({ id: streamed.id });
    await expect(project.storage.download('photos', 'streamed.bin')).rejects.toMatchObject({ status: 404, code: 'not_found' });
    // Past the single-request limit (32 MiB) the SDK uploads resumably (docs/storage.md "Resumable uploads").
    await expect(project.storage.upload('photos', 'big', new Uint8Array(64 * MiB + 1))).resolves.toMatchObject({ bucket: 'photos', key: 'big', size: 64 * MiB + 1 });
  });

  it('moves 48 MiB up and down without holding it in memory', async () => {
    const size = 48 * MiB;
    const chunk = patternBytes(MiB, 9);
    const source = () => {
      let sent = 0;
      return new ReadableStream<Uint8Array>({
        pull(c) {
          if (sent >= size) return c.close();
          c.enqueue(chunk.slice());
          sent += chunk.byteLength;
        },
      });
    };
    const expected = createHash('sha256');
    for (let i = 0; i < size / MiB; i++) expected.update(chunk);
    // Warm the fetch machinery first: its first use loads and allocates what every later call reuses.
    await project.storage.upload('photos', 'warm', 'x');
    await new Response((await project.storage.download('photos', 'warm')).body).arrayBuffer();

    let row: { etag: string; size: number } | undefined;
    const up = await rssGrowth(async () => {
      row = await project.storage.upload('photos', 'large.bin', source(), { size });
    });
    expect(row).toMatchObject({ size, etag: expected.copy().digest('hex') });
    const got = createHash('sha256');
    const down = await rssGrowth(async () => {
      const d = await project.storage.download('photos', 'large.bin');
      for await (const part of d.body!) got.update(part);
    });
    expect(got.digest('hex')).toBe(row!.etag);
    // Holding the body would take all 48 MiB (and did, for a streamed upload through Node's fetch
    // following redirects); what streams costs a few socket and stream buffers.
    expect(up, `upload grew RSS by ${(up / MiB).toFixed(1)} MiB`).toBeLessThan(32 * MiB);
    expect(down, `download grew RSS by ${(down / MiB).toFixed(1)} MiB`).toBeLessThan(32 * MiB);
  });

  it('publishes and subscribes; a revoked key ends the subscription with its 401', async () => {
    const subscriberKey = (await project.keys.create({ label: 'rt' })).key;
    const asKey = sdk.createClient({ baseUrl: stack.url, key: subscriberKey }).project(project.id);
    let opened!: () => void;
    const open = new Promise<void>((r) => (opened = r));
    const reconnects: unknown[] = [];
    const events = asKey.realtime.subscribe(['chat', 'system'], { onOpen: () => opened(), onReconnect: (i) => reconnects.push(i.error), maxBackoffMs: 200 });
    const received: unknown[] = [];
    const reading = (async () => {
      try {
        for await (const e of events) received.push(e);
        return null;
      } catch (err) {
        return err;
      }
    })();
    await open;
    const delivered = await project.realtime.publish('chat', 'message', { text: 'hi' });
    expect(delivered).toMatchObject({ channel: 'chat', event: 'message', payload: { text: 'hi' } });
    await expect.poll(() => received).toEqual([delivered]);
    await expect(project.realtime.publish('system', 'x')).rejects.toMatchObject({ status: 400, code: 'invalid_request' });

    await project.keys.revoke(subscriberKey.slice(5, 37));
    const ended = await reading;
    expect(ended).toBeInstanceOf(sdk.SvcError);
    expect(ended).toMatchObject({ status: 401, code: 'authentication_required' });
  });

  it('ends a subscription when its signal aborts', async () => {
    const controller = new AbortController();
    let opened!: () => void;
    const open = new Promise<void>((r) => (opened = r));
    const reading = (async () => {
      for await (const _ of project.realtime.subscribe('chat', { signal: controller.signal, onOpen: () => opened() })) {
        // nothing is published
      }
    })();
    await open;
    controller.abort(new Error('done watching'));
    await expect(reading).rejects.toThrow('done watching');
  });

  it('keeps secrets write-only and lists receipts', async () => {
    const created = await project.secrets.set('STRIPE_KEY', 'sk_live_abc');
    expect(created).toMatchObject({ name: 'STRIPE_KEY', version: 1 });
    expect((await project.secrets.set('STRIPE_KEY', 'sk_live_def')).version).toBe(2);
    expect(await project.secrets.list().all()).toEqual([expect.objectContaining({ name: 'STRIPE_KEY', version: 2 })]);
    expect(JSON.stringify(await project.secrets.get('STRIPE_KEY'))).not.toContain('sk_live');
    expect((await project.secrets.delete('STRIPE_KEY')).name).toBe('STRIPE_KEY');
    await expect(project.secrets.get('STRIPE_KEY')).rejects.toMatchObject({ status: 404 });
    const receipts = await project.receipts.list({ limit: 2 }).first();
    expect(receipts.receipts.map((r) => r.op)).toEqual(['secret.delete', 'secret.put']);
    expect(receipts.next_cursor).not.toBeNull();
  });
  it('manages what users expect beyond the contract: rename, previous directories, snapshot and bucket deletes, conditions, signed URLs, prefixes', async () => {
    expect((await project.rename('renamed')).name).toBe('renamed');
    expect((await svc.me()).project_count).toBe(2);

    await project.sleep();
    const replaced = await project.replaced.list().all();
    expect(replaced.length).toBe(1);
    expect(await project.replaced.delete(replaced[0]!.name)).toMatchObject({ name: replaced[0]!.name });
    const snap = (await project.snapshots.list().first()).snapshots[0]!;
    expect((await project.snapshots.delete(snap.id)).id).toBe(snap.id);
    await project.wakeup();

    await project.storage.createBucket('docs');
    await project.storage.upload('docs', 'a/1.txt', 'one', { ifNoneMatch: '*' });
    await expect(project.storage.upload('docs', 'a/1.txt', 'again', { ifNoneMatch: '*' })).rejects.toMatchObject({ status: 409, code: 'conflict' });
    const two = await project.storage.upload('docs', 'a/2.txt', 'two');
    await expect(project.storage.upload('docs', 'a/2.txt', 'x', { ifMatch: 'not-the-etag' })).rejects.toMatchObject({ status: 409, code: 'conflict' });
    await project.storage.upload('docs', 'a/2.txt', 'three', { ifMatch: two.etag });
    await project.storage.upload('docs', 'b.txt', 'b');
    const page = await project.storage.list('docs', { delimiter: '/' }).first();
    expect([page.objects.map((o) => o.key), page.common_prefixes]).toEqual([['b.txt'], ['a/']]);
    expect((await project.storage.list('docs', { prefix: 'a/' }).all()).map((o) => o.key)).toEqual(['a/1.txt', 'a/2.txt']);

    const ticket = await project.storage.downloadTicket({ bucket: 'docs', key: 'b.txt', signed: true, expires_in: 60 });
    const anonymous = await fetch(`${stack.url}${ticket.signed_url}`);
    expect([anonymous.status, await anonymous.text()]).toEqual([200, 'b']);

    await expect(project.storage.deleteBucket('docs')).rejects.toMatchObject({ status: 409, code: 'conflict' });
    expect(await project.storage.deleteBucket('docs', { force: true })).toMatchObject({ name: 'docs' });
    expect((await project.logs({ tail: 5 })).lines.length).toBeGreaterThan(0);
  });

  it('hands browsers a single-use realtime ticket', async () => {
    const ticket = await project.realtime.ticket(['chat']);
    expect(ticket).toMatchObject({ project: project.id, channels: ['chat'] });
    const r = await fetch(`${stack.url}${ticket.subscribe_url}`);
    expect([r.status, r.headers.get('content-type')]).toEqual([200, expect.stringContaining('text/event-stream')]);
    await r.body!.cancel();
  });

  it('deploys, invokes, reads and deletes a function', async () => {
    await project.secrets.set('GREETING', 'hello');
    const module = 'export default { async fetch(request, env) { const u = new URL(request.url); return Response.json({ path: u.pathname, q: u.searchParams.get("q"), greeting: env.GREETING, body: await request.text() }); } };';
    const fn = await project.functions.deploy('echo', module, { timeoutMs: 5000 });
    expect(fn).toMatchObject({ name: 'echo', version: 1, timeout_ms: 5000 });
    expect((await project.functions.deploy('echo', new TextEncoder().encode(module))).version).toBe(2);
    expect((await project.functions.list().all()).map((f) => f.name)).toEqual(['echo']);
    expect((await project.functions.versions('echo').all()).map((v) => v.version)).toEqual([2, 1]);
    expect((await project.functions.get('echo')).version).toBe(2);

    const r = await project.functions.invoke('echo', { method: 'POST', path: '/users/7', query: { q: 'x' }, body: 'payload' });
    expect(await r.json()).toEqual({ path: '/users/7', q: 'x', greeting: 'hello', body: 'payload' });
    const asKey = sdk.createClient({ baseUrl: stack.url, key }).project(project.id);
    expect((await (await asKey.functions.invoke('echo')).json()).greeting).toBe('hello');
    await expect(project.functions.invoke('nope')).rejects.toMatchObject({ status: 404, code: 'not_found' });
    expect((await project.functions.logs('echo', { tail: 10 })).lines.join('\n')).toContain('deployed version 2');
    expect((await project.functions.delete('echo')).name).toBe('echo');
  });

  it('ends sessions, rotates the secret, and deletes a project whose receipts stay readable', async () => {
    const receiptsBefore = await svc.receipts(project.id).all();
    expect(receiptsBefore.length).toBeGreaterThan(0);
    const deleted = await project.delete();
    expect(deleted.id).toBe(project.id);
    await expect(project.get()).rejects.toMatchObject({ status: 404 });
    expect((await svc.receipts(project.id).all()).length).toBeGreaterThanOrEqual(receiptsBefore.length);

    const account = await sdk.createClient({ baseUrl: stack.url }).signup({});
    const mine = sdk.createClient({ baseUrl: stack.url, token: account.token });
    const rotated = await mine.rotateSecret(account.account_secret);
    expect(rotated.account_secret).not.toBe(account.account_secret);
    await expect(mine.me()).rejects.toMatchObject({ status: 401, code: 'authentication_required' });
    const fresh = mine.withCredentials({ token: rotated.token });
    expect((await fresh.me()).account_id).toBe(account.account_id);
    await fresh.endSession();
    await expect(fresh.me()).rejects.toMatchObject({ status: 401 });
  });
});
