/**
 * Export and import over the public API against a real host agent and engine (docs/lifecycle.md
 * "Export and import"): the archive's length and name, a round trip into another project with
 * identical rows, the archive of a snapshot whose directory is gone served from the off-machine copy,
 * and every refusal: the authorization matrix, a running tenant, a body that is not an archive,
 * a corrupt one, one over the limit.
 */
import { rmSync } from 'node:fs';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createProject, engineSql, rowsOf, sleep, wake, waitFor } from '../helpers/lifecycle.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

let svc: TestService;
let token: string;
let backups: string;

beforeAll(async () => {
  backups = mkdtempSync(join(tmpdir(), 'svc-backups-'));
  svc = await startTestService({ SVCD_BACKUP_DIR: backups, SVCD_IMPORT_MAX_BYTES: String(4 * 1024 * 1024) });
  ({ token } = await signup(svc));
});
afterAll(async () => {
  await svc?.stop();
  rmSync(backups, { recursive: true, force: true });
});

/** A sleeping project with `rows` rows in its table `t`, and a snapshot of it. */
async function snapshotted(rows: string[]): Promise<{ id: string; snap: any }> {
  const id = await createProject(svc, token, 'archive');
  await wake(svc, token, id);
  const address = `127.0.0.1:${svc.agent.ctx.tenants.liveEndpoint(id)!.port}`;
  await engineSql(address, 'CREATE TABLE t (v TEXT)');
  for (const v of rows) await engineSql(address, 'INSERT INTO t VALUES (?)', [v]);
  await sleep(svc, token, id);
  const snap = (await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, { label: 'export me' })).body;
  return { id, snap };
}

async function download(id: string, snapshotId: string): Promise<{ status: number; bytes: Buffer; headers: Headers }> {
  const r = await svc.request('GET', `/v0/projects/${id}/snapshots/${snapshotId}/archive`, { token });
  return { status: r.status, bytes: Buffer.from(await r.arrayBuffer()), headers: r.headers };
}

async function importInto(id: string, archive: Buffer): Promise<{ status: number; body: any }> {
  const r = await post(`/v0/projects/${id}/import`, archive, { authorization: `Bearer ${token}` });
  return { status: r.status, body: await r.json() };
}

/** A POST of raw bytes (the test service's `request` sends JSON). */
function post(path: string, body: Buffer, headers: Record<string, string>): Promise<Response> {
  return svc.app.fetch(new Request(`http://svc.test${path}`, { method: 'POST', body: new Uint8Array(body), headers: { 'content-type': 'application/x-tar', ...headers } }));
}

describe('export and import', () => {
  let source: { id: string; snap: any };
  let archive: Buffer;

  beforeAll(async () => {
    source = await snapshotted(Array.from({ length: 50 }, (_, i) => `row ${i}`));
    const got = await download(source.id, source.snap.id);
    expect(got.status).toBe(200);
    archive = got.bytes;
  });

  it('answers the archive with its type, length and name', async () => {
    const got = await download(source.id, source.snap.id);
    expect(got.headers.get('content-type')).toBe('application/x-tar');
    expect(Number(got.headers.get('content-length'))).toBe(got.bytes.length);
    expect(got.headers.get('content-disposition')).toBe(`attachment; filename="${source.id}-${source.snap.id}.tar"`);
    expect(got.bytes.equals(archive)).toBe(true);
  });

  it('imports into another project: a new snapshot restored, the previous directory kept, identical rows', async () => {
    const target = await snapshotted(['other']);
    const imported = await importInto(target.id, archive);
    expect(imported.status, JSON.stringify(imported.body)).toBe(200);
    expect(imported.body.state).toBe('sleeping');
    expect(imported.body.snapshot.label).toBe('import');
    expect(imported.body.snapshot.project).toBe(target.id);
    expect(imported.body.snapshot_id).toBe(imported.body.snapshot.id);
    expect(imported.body.replaced_dir).toMatch(/replaced/);
    expect(imported.body.snapshot.backup.checkpoint_digest).toBe(source.snap.backup.checkpoint_digest);
    expect(imported.body.snapshot.lineage.root_digest).toBe(source.snap.lineage.root_digest);
    expect(await rowsOf(svc, token, target.id)).toEqual(await rowsOf(svc, token, source.id));
    await sleep(svc, token, target.id);
    await sleep(svc, token, source.id);
    // Recorded like any snapshot, and shipped off the machine.
    await waitFor(async () => (await call(svc, 'GET', `/v0/projects/${target.id}/snapshots/${imported.body.snapshot.id}`, token)).body.offsite.state === 'complete', 20_000, 50);
  });

  it('serves the archive from the off-machine copy once the directory is gone', async () => {
    await waitFor(async () => (await call(svc, 'GET', `/v0/projects/${source.id}/snapshots/${source.snap.id}`, token)).body.offsite.state === 'complete', 20_000, 50);
    const local = svc.agent.ctx.tenants.layout.backupDir(source.id, source.snap.id);
    rmSync(local, { recursive: true, force: true });
    const got = await download(source.id, source.snap.id);
    expect(got.status).toBe(200);
    expect(got.bytes.equals(archive)).toBe(true);
  });

  it('refuses a running tenant, a body that is not an archive, a corrupt archive, one over the limit', async () => {
    const target = await snapshotted(['kept']);
    const before = await call(svc, 'GET', `/v0/projects/${target.id}/snapshots`, token);
    await wake(svc, token, target.id);
    const running = await importInto(target.id, archive);
    expect(running.status).toBe(409);
    expect(running.body.error.code).toBe('tenant_running');
    await sleep(svc, token, target.id);

    const notTar = await importInto(target.id, Buffer.from('definitely not a tar archive'));
    expect(notTar.status).toBe(400);
    expect(notTar.body.error.code).toBe('invalid_request');

    // One byte of the database changed: the manifest's SHA-256 no longer holds.
    const corrupt = Buffer.from(archive);
    const at = corrupt.indexOf(Buffer.from('SQLite format 3'));
    expect(at).toBeGreaterThan(0);
    corrupt[at + 200] = corrupt[at + 200]! ^ 0xff;
    const refused = await importInto(target.id, corrupt);
    expect(refused.status, JSON.stringify(refused.body)).toBe(409);
    expect(refused.body.error.code).toBe('conflict');

    const tooLarge = await importInto(target.id, Buffer.concat([archive, Buffer.alloc(4 * 1024 * 1024)]));
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error.code).toBe('payload_too_large');

    // Nothing of any refused import is left: same snapshots, same rows.
    const ids = (page: any) => page.snapshots.map((x: any) => x.id);
    expect(ids((await call(svc, 'GET', `/v0/projects/${target.id}/snapshots`, token)).body)).toEqual(ids(before.body));
    expect(svc.logs.filter((l) => /snapshot .* deleted on request/.test(l))).toEqual([]);
    expect(await rowsOf(svc, token, target.id)).toEqual(['kept']);
    await sleep(svc, token, target.id);
  });

  it('each route answers another account 404, a project key 401 and no credential 401', async () => {
    const other = await signup(svc);
    const projectKey = (await call(svc, 'POST', `/v0/projects/${source.id}/keys`, token, {})).body.key as string;
    const routes: [string, string][] = [
      ['GET', `/v0/projects/${source.id}/snapshots/${source.snap.id}/archive`],
      ['POST', `/v0/projects/${source.id}/import`],
    ];
    for (const [method, path] of routes) {
      const send = (headers: Record<string, string>) => (method === 'POST' ? post(path, archive, headers) : svc.request(method, path, { headers }));
      const foreign = await send({ authorization: `Bearer ${other.token}` });
      expect(foreign.status, `${method} ${path}`).toBe(404);
      for (const headers of [{ authorization: `Bearer ${projectKey}` }, {}] as Record<string, string>[]) {
        const r = await send(headers);
        expect(r.status, `${method} ${path}`).toBe(401);
      }
    }
    const unknown = await svc.request('GET', `/v0/projects/${source.id}/snapshots/snap_0000000000000000/archive`, { token });
    expect(unknown.status).toBe(404);
  });
});
