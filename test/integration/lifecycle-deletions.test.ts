/**
 * Deleting snapshots and freeing the previous data directories restore keeps, over the public API
 * against a real host agent and the real engine (docs/lifecycle.md "Deleting a snapshot", "Previous
 * data directories"): each route's authorization, the listing after several restores, the bytes
 * freed, names that would leave `replaced/`, a deleted snapshot that cannot be restored, receipts,
 * and the 409 while a snapshot is restored or taken.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { treeBytes } from '../../host-agent/tenants/replaced.ts';
import { tempDir } from '../helpers/env.ts';
import { ENGINE, call, createProject, engineSql, fakeEngine, rowsOf, sleep, wake, waitFor } from '../helpers/lifecycle.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

/** A sleeping project with rows, snapshots A (one row) and B (two rows), and three restores: A, B, A. */
interface Restored {
  id: string;
  a: any;
  b: any;
  /** The restore answers, in the order they were made. */
  restores: { answer: any; askedAt: number }[];
}

async function withRestores(svc: TestService, token: string): Promise<Restored> {
  const tenants = svc.agent.ctx.tenants;
  const id = await createProject(svc, token, 'deletions');
  await wake(svc, token, id);
  const address = () => `127.0.0.1:${tenants.liveEndpoint(id)!.port}`;
  await engineSql(address(), 'CREATE TABLE t (v TEXT)');
  await engineSql(address(), "INSERT INTO t VALUES ('one')");
  await sleep(svc, token, id);
  const a = (await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, { label: 'a' })).body;
  await wake(svc, token, id);
  await engineSql(address(), "INSERT INTO t VALUES ('two')");
  await sleep(svc, token, id);
  const b = (await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, { label: 'b' })).body;
  const restores: Restored['restores'] = [];
  for (const snap of [a, b, a]) {
    const askedAt = Date.now();
    const r = await call(svc, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snap.id });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    restores.push({ answer: r.body, askedAt });
  }
  return { id, a, b, restores };
}

/** The rows of the project's table, read through a wakeup (then asleep again). */
async function rowsAsleep(svc: TestService, token: string, id: string): Promise<string[]> {
  const rows = await rowsOf(svc, token, id);
  await sleep(svc, token, id);
  return rows;
}

describe('with the real engine', () => {
  let svc: TestService;
  let token: string;
  let accountId: string;
  let p: Restored;

  beforeAll(async () => {
    svc = await startTestService();
    ({ token, accountId } = await signup(svc));
    p = await withRestores(svc, token);
  });

  afterAll(async () => {
    await svc?.stop();
  });

  const replacedOf = async (id: string, query = '') => call(svc, 'GET', `/v0/projects/${id}/replaced${query}`, token);

  it('each route answers another account 404, a project key 401 and no credential 401, and changes nothing', async () => {
    const other = await signup(svc);
    const projectKey = (await call(svc, 'POST', `/v0/projects/${p.id}/keys`, token, {})).body.key as string;
    const name = (await replacedOf(p.id)).body.replaced[0].name as string;
    const routes: [string, string][] = [
      ['GET', `/v0/projects/${p.id}/snapshots`],
      ['GET', `/v0/projects/${p.id}/snapshots/${p.a.id}`],
      ['DELETE', `/v0/projects/${p.id}/snapshots/${p.a.id}`],
      ['GET', `/v0/projects/${p.id}/replaced`],
      ['DELETE', `/v0/projects/${p.id}/replaced/${name}`],
    ];
    for (const [method, path] of routes) {
      const foreign = await call(svc, method, path, other.token);
      expect(foreign.status, `${method} ${path}`).toBe(404);
      expect(foreign.body.error.code).toBe('not_found');
      for (const headers of [{ authorization: `Bearer ${projectKey}` }, {}] as Record<string, string>[]) {
        const r = await svc.request(method, path, { headers });
        expect(r.status, `${method} ${path}`).toBe(401);
        expect(r.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
        expect(((await r.json()) as any).error.code).toBe('authentication_required');
      }
    }
    expect((await call(svc, 'GET', `/v0/projects/${p.id}/snapshots/${p.a.id}`, token)).status).toBe(200);
    expect((await replacedOf(p.id)).body.replaced).toHaveLength(3);
  });

  it('lists every directory restore moved aside, newest first, with its time, snapshot, path and bytes', async () => {
    const r = await replacedOf(p.id);
    expect(r.status).toBe(200);
    expect(r.body.next_cursor).toBeNull();
    const listed = r.body.replaced as any[];
    const newestFirst = [...p.restores].reverse();
    expect(listed.map((e) => e.path)).toEqual(newestFirst.map((x) => x.answer.replaced_dir));
    expect(listed.map((e) => e.snapshot_id)).toEqual([p.a.id, p.b.id, p.a.id]);
    for (const [i, entry] of listed.entries()) {
      const { answer, askedAt } = newestFirst[i]!;
      expect(Object.keys(entry).sort()).toEqual(['bytes', 'moved_at', 'name', 'path', 'snapshot_id']);
      expect(entry.path).toBe(join(svc.agent.ctx.tenants.layout.replacedRoot(p.id), entry.name));
      // Moved while that restore ran: after it was asked for, no later than it answered.
      expect(Date.parse(entry.moved_at)).toBeGreaterThanOrEqual(askedAt - 1);
      expect(Date.parse(entry.moved_at)).toBeLessThanOrEqual(Date.parse(answer.restored_at));
      expect(entry.bytes).toBeGreaterThan(0);
      expect(entry.bytes).toBe(await treeBytes(entry.path));
    }
  });

  it('pages with limit and a sealed cursor bound to this list', async () => {
    const all = (await replacedOf(p.id)).body.replaced.map((e: any) => e.name);
    const first = await replacedOf(p.id, '?limit=2');
    expect(first.body.replaced.map((e: any) => e.name)).toEqual(all.slice(0, 2));
    expect(typeof first.body.next_cursor).toBe('string');
    const second = await replacedOf(p.id, `?limit=2&cursor=${first.body.next_cursor}`);
    expect(second.body.replaced.map((e: any) => e.name)).toEqual(all.slice(2));
    expect(second.body.next_cursor).toBeNull();
    const snapshotsCursor = (await call(svc, 'GET', `/v0/projects/${p.id}/snapshots?limit=1`, token)).body.next_cursor;
    for (const query of ['?limit=0', '?limit=x', `?cursor=${snapshotsCursor}`, `?cursor=${first.body.next_cursor}x`, '?after=a', '?limit=1&limit=2']) {
      const bad = await replacedOf(p.id, query);
      expect(bad.status, query).toBe(400);
      expect(bad.body.error.code).toBe('invalid_request');
    }
    const withBody = await svc.request('GET', `/v0/projects/${p.id}/replaced`, { token, headers: { 'content-length': '2' } });
    expect(withBody.status).toBe(400);
  });

  it('names that could leave replaced/ are 400 and touch nothing; an unknown name is 404', async () => {
    const before = (await replacedOf(p.id)).body.replaced;
    const unsafe = ['..%2F..%2Fdata', '%2e%2e%2Fdata', '%2E%2E%2F', '.hidden', 'a%5Cb', 'a%2Fb', '%00', `${'x'.repeat(129)}`, '%', '%ZZ', '%20x'];
    for (const name of unsafe) {
      const r = await call(svc, 'DELETE', `/v0/projects/${p.id}/replaced/${name}`, token);
      expect(r.status, name).toBe(400);
      expect(r.body.error.code).toBe('invalid_request');
      expect(r.body.error.message).toMatch(/^name: /);
    }
    // A dot segment (literal or percent-encoded) is resolved by URL parsing before any route sees
    // it (WHATWG URL, RFC 3986 §5.2.4): it never reaches this route.
    expect((await call(svc, 'DELETE', `/v0/projects/${p.id}/replaced/../data`, token)).status).toBe(404);
    const unknown = await call(svc, 'DELETE', `/v0/projects/${p.id}/replaced/20260101T000000000Z-snap_0000000000000000`, token);
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('not_found');
    expect((await replacedOf(p.id)).body.replaced).toEqual(before);
    expect(existsSync(svc.agent.ctx.tenants.layout.dataDir(p.id))).toBe(true);
  });

  it('DELETE frees one directory: answered as it was (its bytes freed), gone from disk and list, receipted once', async () => {
    const before = (await replacedOf(p.id)).body.replaced as any[];
    const oldest = before[before.length - 1];
    const tenantDir = svc.agent.ctx.tenants.layout.tenantDir(p.id);
    const bytesBefore = await treeBytes(tenantDir);
    const r = await svc.request('DELETE', `/v0/projects/${p.id}/replaced/${oldest.name}`, { token });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual(oldest);
    expect(existsSync(oldest.path)).toBe(false);
    expect(bytesBefore - (await treeBytes(tenantDir))).toBe(oldest.bytes);
    expect(existsSync(svc.agent.ctx.tenants.layout.discardingRoot(p.id)) && readdirSync(svc.agent.ctx.tenants.layout.discardingRoot(p.id))).toEqual([]);
    expect((await replacedOf(p.id)).body.replaced).toEqual(before.slice(0, -1));
    const receipts = (await call(svc, 'GET', `/v0/projects/${p.id}/receipts`, token)).body.receipts as any[];
    expect(receipts.filter((x) => x.op === 'replaced.delete')).toEqual([
      expect.objectContaining({ project: p.id, op: 'replaced.delete', target: oldest.name, actor: accountId, request_id: r.headers.get('x-request-id') }),
    ]);
    const again = await call(svc, 'DELETE', `/v0/projects/${p.id}/replaced/${oldest.name}`, token);
    expect(again.status).toBe(404);
    // The data directory in use is untouched: the last restore (snapshot A) serves.
    expect(await rowsAsleep(svc, token, p.id)).toEqual(['one']);
  });

  it('GET snapshots and GET snapshot read what was recorded', async () => {
    const list = await call(svc, 'GET', `/v0/projects/${p.id}/snapshots`, token);
    expect(list.body.snapshots).toEqual([p.b, p.a]);
    expect((await call(svc, 'GET', `/v0/projects/${p.id}/snapshots/${p.b.id}`, token)).body).toEqual(p.b);
  });

  it('DELETE snapshot removes its row and backup directory; it is then 404 to read, restore and delete', async () => {
    const id = p.id;
    const backupDir = svc.agent.ctx.tenants.layout.backupDir(id, p.b.id);
    expect(existsSync(join(backupDir, 'manifest.json'))).toBe(true);
    const r = await svc.request('DELETE', `/v0/projects/${id}/snapshots/${p.b.id}`, { token });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual(p.b);
    expect(existsSync(backupDir)).toBe(false);
    expect((await call(svc, 'GET', `/v0/projects/${id}/snapshots/${p.b.id}`, token)).status).toBe(404);
    expect((await call(svc, 'GET', `/v0/projects/${id}/snapshots`, token)).body.snapshots).toEqual([p.a]);
    const restore = await call(svc, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: p.b.id });
    expect(restore.status).toBe(404);
    expect(restore.body.error.code).toBe('not_found');
    expect((await call(svc, 'DELETE', `/v0/projects/${id}/snapshots/${p.b.id}`, token)).status).toBe(404);
    const receipts = (await call(svc, 'GET', `/v0/projects/${id}/receipts`, token)).body.receipts as any[];
    expect(receipts.filter((x) => x.op === 'snapshot.delete')).toEqual([
      expect.objectContaining({ op: 'snapshot.delete', target: p.b.id, actor: accountId, request_id: r.headers.get('x-request-id') }),
    ]);
    // The newest snapshot left is what head reports; the other snapshot still restores.
    expect((await call(svc, 'GET', `/v0/projects/${id}/head`, token)).body.latest_snapshot).toBe(p.a.id);
    expect((await call(svc, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: p.a.id })).status).toBe(200);
  });

  it('DELETE snapshot refuses a malformed id (400), a body or a query (400), and works whatever the tenant state', async () => {
    expect((await call(svc, 'DELETE', `/v0/projects/${p.id}/snapshots/snap_x`, token)).status).toBe(400);
    expect((await call(svc, 'DELETE', `/v0/projects/${p.id}/snapshots/${p.a.id}?force=true`, token)).status).toBe(400);
    expect((await call(svc, 'DELETE', `/v0/projects/${p.id}/snapshots/${p.a.id}`, token, {})).status).toBe(400);
    await wake(svc, token, p.id);
    const r = await call(svc, 'DELETE', `/v0/projects/${p.id}/snapshots/${p.a.id}`, token);
    expect(r.status).toBe(200);
    await sleep(svc, token, p.id);
  });
});

describe('while a snapshot is in use', () => {
  let svc: TestService;
  let token: string;
  let bin: { dir: string; cleanup: () => void };

  beforeAll(async () => {
    bin = tempDir('svc-slow-engine-');
    // Restore waits a second before it begins; backup waits a second after it finished.
    const engine = fakeEngine(bin.dir, 'engine', {
      commands: { restore: 'sleep 1', backup: `"${ENGINE}" "$@"; rc=$?; sleep 1; exit $rc` },
    });
    svc = await startTestService({ SVCD_ENGINE_BIN: engine });
    ({ token } = await signup(svc));
  });

  afterAll(async () => {
    await svc?.stop();
    bin?.cleanup();
  });

  async function sleepingWithSnapshots(count: number): Promise<{ id: string; snaps: any[] }> {
    const id = await createProject(svc, token, 'in-use');
    await wake(svc, token, id);
    await sleep(svc, token, id);
    const snaps = [];
    for (let i = 0; i < count; i++) snaps.push((await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, {})).body);
    return { id, snaps };
  }

  it('409 conflict while it is being restored; another snapshot is deleted once the restore is done', async () => {
    const { id, snaps } = await sleepingWithSnapshots(2);
    const [a, b] = snaps;
    const restoring = call(svc, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: a.id });
    expect(await waitFor(() => existsSync(svc.agent.ctx.tenants.layout.restoreJournal(id)), 10_000, 1)).toBe(true);
    const refused = await call(svc, 'DELETE', `/v0/projects/${id}/snapshots/${a.id}`, token);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('conflict');
    const other = await call(svc, 'DELETE', `/v0/projects/${id}/snapshots/${b.id}`, token);
    expect(other.status).toBe(200);
    expect((await restoring).status).toBe(200);
    expect((await call(svc, 'DELETE', `/v0/projects/${id}/snapshots/${a.id}`, token)).status).toBe(200);
    expect(existsSync(svc.agent.ctx.tenants.layout.snapshotRoot(id)) && readdirSync(svc.agent.ctx.tenants.layout.snapshotRoot(id))).toEqual([]);
  });

  it('409 conflict while it is being taken; deleted once it is recorded', async () => {
    const { id } = await sleepingWithSnapshots(0);
    const root = svc.agent.ctx.tenants.layout.snapshotRoot(id);
    const taking = call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, {});
    const found = await waitFor(() => (existsSync(root) ? readdirSync(root).find((n) => /^snap_[0-9a-f]{16}$/.test(n)) : undefined), 10_000, 1);
    expect(found).toBeTruthy();
    const refused = await call(svc, 'DELETE', `/v0/projects/${id}/snapshots/${found}`, token);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('conflict');
    const taken = await taking;
    expect(taken.status).toBe(201);
    expect(taken.body.id).toBe(found);
    expect((await call(svc, 'DELETE', `/v0/projects/${id}/snapshots/${found}`, token)).status).toBe(200);
  });
});
