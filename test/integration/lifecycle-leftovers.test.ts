/**
 * What crashes leave behind (docs/lifecycle.md "Leftovers", docs/storage.md "Nothing lost"): the
 * host agent runs as its own process (`bin/svc-agent`), is SIGKILLed, and is started again over the
 * same root and table.
 *
 * - Leftovers are swept at start, each sweep logged: temp files, engine and restore staging,
 *   backups without a snapshot row, fs blobs no catalog row references (older than the safe age);
 *   `replaced/`, recorded snapshots and referenced or fresh blobs stay.
 * - A DELETE whose blob removal failed says so in the log, and the blob is swept at the next start.
 */
import { existsSync, mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Layout } from '../../host-agent/tenants/layout.ts';
import type { Db } from '../../shared/db/client.ts';
import { newSnapshotId } from '../../shared/db/snapshots.ts';
import { getObject } from '../../shared/db/storage.ts';
import { ChildAgent, startChildDeployment, type ChildDeployment } from '../helpers/child-agent.ts';
import { call, sleep, wake, type Api } from '../helpers/lifecycle.ts';

let d: ChildDeployment;
let agent: ChildAgent;
let db: Db;
let layout: Layout;
let root: { dir: string };
let token: string;
const handlerLog: string[] = [];
const api: Api = { request: (...args) => d.api.request(...args) };

beforeAll(async () => {
  d = await startChildDeployment('svc-leftovers-', {}, (line) => handlerLog.push(line));
  ({ agent, db, layout, root, token } = d);
});

afterAll(() => d?.stop());

async function newProject(): Promise<string> {
  const r = await call(api, 'POST', '/v0/projects', token, { name: 'leftovers' });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id as string;
}

const HEX64 = (c: string) => c.repeat(64);
const TWO_HOURS_AGO = () => new Date(Date.now() - 2 * 3600_000);

function blobPath(projectId: string, name: string): string {
  return join(root.dir, 'blobs', projectId, name.slice(0, 2), name);
}

/** A blob file written directly (what a crash between write and flip leaves), optionally aged. */
function plantBlob(projectId: string, name: string, old: boolean): string {
  const path = blobPath(projectId, name);
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, 'orphan bytes');
  if (old) utimesSync(path, TWO_HOURS_AGO(), TWO_HOURS_AGO());
  return path;
}

function plantDir(path: string): string {
  mkdirSync(path, { recursive: true });
  writeFileSync(join(path, 'file'), 'leftover');
  return path;
}

async function putObject(projectId: string, bucket: string, key: string, body: string): Promise<string> {
  expect((await api.request('PUT', `/v0/projects/${projectId}/storage/buckets/${bucket}`, { token })).status).toBeLessThan(300);
  const r = await api.request('PUT', `/v0/projects/${projectId}/storage/objects/${bucket}/${key}`, { token, body, headers: { 'content-type': 'text/plain' } });
  expect(r.status, await r.clone().text()).toBe(201);
  return (await getObject(db, projectId, bucket, key))!.blob!;
}

describe('leftovers are swept at agent start', () => {
  it('removes temp files, staging, unrecorded backups and old unreferenced blobs; keeps replaced/, recorded snapshots, referenced and fresh blobs', async () => {
    const id = await newProject();
    await wake(api, token, id);
    await sleep(api, token, id);
    const snap = await call(api, 'POST', `/v0/projects/${id}/snapshots`, token, {});
    expect(snap.status).toBe(201);
    const restored = await call(api, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snap.body.id });
    expect(restored.status, JSON.stringify(restored.body)).toBe(200);
    const replaced = restored.body.replaced_dir as string;
    const referenced = await putObject(id, 'photos', 'cat.jpg', 'meow');
    await agent.kill9();

    const tenant = layout.tenantDir(id);
    const gone = [
      // Temp files of durable writes and of the fs store.
      (writeFileSync(join(layout.run, `${id}.json.tmp-12345`), '{"pid":'), join(layout.run, `${id}.json.tmp-12345`)),
      (writeFileSync(join(tenant, 'restore.json.tmp-777-abc123'), '{'), join(tenant, 'restore.json.tmp-777-abc123')),
      (mkdirSync(join(root.dir, 'blobs', '.tmp'), { recursive: true }),
      writeFileSync(join(root.dir, 'blobs', '.tmp', `${HEX64('d')}.deadbeef`), 'half'),
      join(root.dir, 'blobs', '.tmp', `${HEX64('d')}.deadbeef`)),
      // Restore staging: a fresh directory no journal names, an unapplied one; init and engine staging.
      plantDir(join(tenant, `restoring-20260101T000000000Z-${snap.body.id}`)),
      plantDir(join(tenant, 'unapplied', `20260101T000000000Z-${snap.body.id}`)),
      plantDir(join(tenant, 'initializing-20260101T000000000Z-0a1b')),
      plantDir(join(tenant, 'data.staging-0123456789abcdef')),
      plantDir(join(layout.snapshotRoot(id), `${snap.body.id}.staging-0123456789abcdef`)),
      // A backup whose snapshot was never recorded (a crash between backup and row).
      plantDir(layout.backupDir(id, newSnapshotId(Date.now() - 60_000))),
      // A blob no row references, older than the safe age.
      plantBlob(id, HEX64('e'), true),
    ];
    // A blob no row references yet, written just now: a PUT in flight may be about to flip to it.
    const fresh = plantBlob(id, HEX64('f'), false);
    // The referenced blob, old too: a row references it, so it stays whatever its age.
    utimesSync(blobPath(id, referenced), TWO_HOURS_AGO(), TWO_HOURS_AGO());
    const kept = [layout.dataDir(id), replaced, snap.body.backup_dir as string, fresh, blobPath(id, referenced)];

    const logFrom = agent.output.length;
    await agent.start();
    const blobLine = await agent.logLine(/swept unreferenced fs blobs/, logFrom);
    const backupLine = await agent.logLine(/swept backups without a snapshot row/, logFrom);
    for (const path of gone) expect(existsSync(path), relative(root.dir, path)).toBe(false);
    for (const path of kept) expect(existsSync(path), relative(root.dir, path)).toBe(true);

    // One line per sweep, with counts and what was removed.
    const log = agent.output.slice(logFrom);
    expect(log).toMatch(/swept temp files: 3 removed/);
    expect(log).toMatch(/swept staging directories: 5 removed/);
    expect(log).toContain('unapplied');
    expect(backupLine).toMatch(/1 removed/);
    expect(blobLine).toMatch(/1 removed/);
    expect(blobLine).toContain(HEX64('e'));
    expect(blobLine).not.toContain(HEX64('f'));

    // The tenant and its object are what they were.
    const read = await api.request('GET', `/v0/projects/${id}/storage/objects/photos/cat.jpg`, { token });
    expect(await read.text()).toBe('meow');
    const again = await call(api, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snap.body.id });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
  });

  it('a DELETE whose blob removal failed says so, and the blob is swept at the next start', async () => {
    const id = await newProject();
    const name = await putObject(id, 'docs', 'a.txt', 'bytes');
    await agent.kill9();
    // The agent's record is still fresh: the row goes, the blob removal cannot reach the agent.
    const del = await call(api, 'DELETE', `/v0/projects/${id}/storage/objects`, token, { bucket: 'docs', key: 'a.txt' });
    expect(del.status, JSON.stringify(del.body)).toBe(200);
    expect(await getObject(db, id, 'docs', 'a.txt')).toBeNull();
    expect(existsSync(blobPath(id, name))).toBe(true);
    const said = handlerLog.find((line) => line.includes(name));
    expect(said).toMatch(/blob removal failed; it will be swept at the next agent start/);

    // An hour later (aged by hand), the next start sweeps it.
    utimesSync(blobPath(id, name), TWO_HOURS_AGO(), TWO_HOURS_AGO());
    const logFrom = agent.output.length;
    await agent.start();
    const line = await agent.logLine(new RegExp(`swept unreferenced fs blobs.*${name}`), logFrom);
    expect(line).not.toBeNull();
    expect(existsSync(blobPath(id, name))).toBe(false);
  });
});
