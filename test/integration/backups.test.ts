/**
 * Off-machine copies of snapshots (docs/lifecycle.md "Off-machine copies"), against a real host agent
 * and engine, with the `fs` store (SVCD_BACKUP_DIR) and the `s3` one (s3rver): a snapshot is copied
 * after its 201, its row and the project answer say so, the copy is the backup's bytes, deleting the
 * snapshot deletes the copy, a copy that fails its check is never complete, and the start's resume
 * ships what was left pending and removes copies whose snapshot is gone. Without a store: `unavailable`.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, truncateSync } from 'node:fs';
import { cp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { checkDir } from '../../host-agent/backups/manifest.ts';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../shared/db/table.ts';
import { s3TestSettings } from '../setup/s3rver.ts';
import { call, createProject, engineSql, sleep, wake, waitFor } from '../helpers/lifecycle.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

/** A sleeping project with one table of `rows` rows. */
async function projectWithRows(svc: TestService, token: string, rows: number): Promise<string> {
  const id = await createProject(svc, token, 'backups');
  await wake(svc, token, id);
  const address = `127.0.0.1:${svc.agent.ctx.tenants.liveEndpoint(id)!.port}`;
  await engineSql(address, 'CREATE TABLE t (v TEXT)');
  for (let i = 0; i < rows; i++) await engineSql(address, 'INSERT INTO t VALUES (?)', [`row ${i}`]);
  await sleep(svc, token, id);
  return id;
}

/** The row as a crash before its copy completed leaves it (the agent never takes `complete` back itself). */
async function markPending(svc: TestService, id: string, snapshotId: string): Promise<void> {
  await svc.db.doc.send(
    new UpdateCommand({ TableName: svc.db.table, Key: keys.snapshot(id, snapshotId), UpdateExpression: 'SET offsite = :o', ExpressionAttributeValues: { ':o': { state: 'pending', completed_at: null } } }),
  );
}

const snapshotOf = async (svc: TestService, token: string, id: string, snap: string) => (await call(svc, 'GET', `/v0/projects/${id}/snapshots/${snap}`, token)).body;
const projectOf = async (svc: TestService, token: string, id: string) => (await call(svc, 'GET', `/v0/projects/${id}`, token)).body;

const backends: [string, () => Record<string, string>][] = [
  ['fs', () => ({ SVCD_BACKUP_DIR: mkdtempSync(join(tmpdir(), 'svc-backups-')) })],
  ['s3', () => s3TestSettings(inject('s3Endpoint'))],
];

describe.each(backends)('with the %s store', (kind, settings) => {
  let svc: TestService;
  let token: string;
  let backupDir: string | undefined;

  beforeAll(async () => {
    const env = settings();
    backupDir = env.SVCD_BACKUP_DIR;
    svc = await startTestService(env);
    ({ token } = await signup(svc));
  });
  afterAll(async () => {
    await svc?.stop();
    if (backupDir) rmSync(backupDir, { recursive: true, force: true });
  });

  it('copies a snapshot after its 201; its row and the project answer say when; the copy is the backup', async () => {
    const id = await projectWithRows(svc, token, 3);
    const created = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, { label: 'one' });
    expect(created.status).toBe(201);
    expect(['pending', 'complete']).toContain(created.body.offsite.state);
    const snap = await waitFor(async () => {
      const s = await snapshotOf(svc, token, id, created.body.id);
      return s.offsite.state === 'complete' ? s : null;
    }, 20_000, 50);
    expect(Date.parse(snap.offsite.completed_at)).toBeGreaterThanOrEqual(Date.parse(snap.created_at));
    const store = svc.agent.ctx.backups.store!;
    expect(store.kind).toBe(kind);
    expect(await store.isComplete(id, snap.id)).toBe(true);
    // The project item follows the row.
    const project = await waitFor(async () => {
      const p = await projectOf(svc, token, id);
      return p.last_backup_offsite === 'complete' ? p : null;
    }, 5000, 20);
    expect(project.last_backup_at).toBe(snap.created_at);
    expect(project.last_backup_offsite).toBe('complete');

    // fetchInto: the copy comes back as the backup's bytes (checked against its manifest).
    const into = join(mkdtempSync(join(tmpdir(), 'svc-fetch-')), 'copy');
    await svc.agent.ctx.backups.fetchInto(id, snap.id, into);
    const manifest = await checkDir(into, 'fetched');
    expect(manifest.files.map((f) => f.path).sort()).toEqual(['data.sqlite', 'meta.json']);
    expect(manifest.files.find((f) => f.path === 'data.sqlite')!.sha256).toBeDefined();
    rmSync(join(into, '..'), { recursive: true, force: true });

    // Deleting the snapshot deletes its copy, and the recovery point with it.
    expect((await call(svc, 'DELETE', `/v0/projects/${id}/snapshots/${snap.id}`, token)).status).toBe(200);
    expect(await store.isComplete(id, snap.id)).toBe(false);
    expect(await store.list(id)).toEqual([]);
    const after = await projectOf(svc, token, id);
    expect(after.last_backup_at).toBeNull();
    expect(after.last_backup_offsite).toBeNull();
  });

  it('a copy that fails its check is never complete, and leaves nothing a fetch would take', async () => {
    const id = await projectWithRows(svc, token, 1);
    const snap = (await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, {})).body;
    await waitFor(async () => (await snapshotOf(svc, token, id, snap.id)).offsite.state === 'complete', 20_000, 50);
    const store = svc.agent.ctx.backups.store!;
    // A damaged source (a byte short): the put refuses, and nothing claims to be complete.
    const damaged = mkdtempSync(join(tmpdir(), 'svc-damaged-'));
    await cp(svc.agent.ctx.tenants.layout.backupDir(id, snap.id), damaged, { recursive: true });
    truncateSync(join(damaged, 'data.sqlite'), 100);
    const other = 'snap_0000000000010000';
    await expect(store.put(id, other, damaged)).rejects.toMatchObject({ code: 'conflict' });
    expect(await store.isComplete(id, other)).toBe(false);
    await expect(store.fetch(id, other, join(damaged, 'into'))).rejects.toMatchObject({ code: 'not_found' });
    await store.remove(id, other);
    rmSync(damaged, { recursive: true, force: true });
  });

  it('resume ships a snapshot left pending and removes a copy whose snapshot is gone', async () => {
    const id = await projectWithRows(svc, token, 2);
    const snap = (await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, {})).body;
    await waitFor(async () => (await snapshotOf(svc, token, id, snap.id)).offsite.state === 'complete', 20_000, 50);
    const store = svc.agent.ctx.backups.store!;
    // As a crash would leave them: the copy never made (row pending), and a copy without a row.
    await store.remove(id, snap.id);
    await markPending(svc, id, snap.id);
    const orphan = 'snap_00000000000a0000';
    await store.put(id, orphan, svc.agent.ctx.tenants.layout.backupDir(id, snap.id));
    expect(await store.isComplete(id, orphan)).toBe(true);
    await svc.agent.ctx.backups.resume();
    expect((await snapshotOf(svc, token, id, snap.id)).offsite.state).toBe('complete');
    expect(await store.isComplete(id, snap.id)).toBe(true);
    expect(await store.list(id)).toEqual([snap.id]);
    if (kind === 'fs') expect(readdirSync(join(backupDir!, id))).toEqual([snap.id]);
  });

  it('deleting the project deletes its copies', async () => {
    const id = await projectWithRows(svc, token, 1);
    const snap = (await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, {})).body;
    await waitFor(async () => (await snapshotOf(svc, token, id, snap.id)).offsite.state === 'complete', 20_000, 50);
    expect((await call(svc, 'DELETE', `/v0/projects/${id}`, token)).status).toBe(200);
    expect(await svc.agent.ctx.backups.store!.list(id)).toEqual([]);
    if (kind === 'fs') expect(existsSync(join(backupDir!, id))).toBe(false);
  });
});

describe('without a store (fs, SVCD_BACKUP_DIR unset)', () => {
  let svc: TestService;
  let token: string;
  beforeAll(async () => {
    svc = await startTestService();
    ({ token } = await signup(svc));
  });
  afterAll(() => svc?.stop());

  it('says so at start, and every snapshot is unavailable off the machine', async () => {
    expect(svc.logs.some((l) => /warning: snapshots are not copied off this machine/.test(l))).toBe(true);
    const id = await projectWithRows(svc, token, 1);
    const created = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, {});
    expect(created.body.offsite).toEqual({ state: 'unavailable', completed_at: null });
    expect((await snapshotOf(svc, token, id, created.body.id)).offsite.state).toBe('unavailable');
    await waitFor(async () => (await projectOf(svc, token, id)).last_backup_offsite === 'unavailable', 5000, 20);
    expect((await projectOf(svc, token, id)).last_backup_at).toBeNull();
  });
});
