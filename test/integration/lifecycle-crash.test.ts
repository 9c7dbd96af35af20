/**
 * Crash safety of the lifecycle (docs/lifecycle.md "Crash safety: agent start"): the host agent runs as its own process
 * (`bin/svc-agent`) and is SIGKILLed in the middle of wakeup, sleep, snapshot and restore; after a
 * restart every tenant's data directory is intact and every recorded state is true. An interrupted
 * restore (a crash between its two renames, and one before them) is repaired at start.
 */
import { existsSync, readdirSync, readFileSync, renameSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../shared/db/client.ts';
import { getProject } from '../../shared/db/projects.ts';
import { type Layout } from '../../host-agent/tenants/layout.ts';
import { ChildAgent, startChildDeployment, type ChildDeployment } from '../helpers/child-agent.ts';
import { ENGINE, call, engineSql, newProjectWithRows as projectWithRows, pidAlive, rowsOf as rowsOfProject, sleep, wake, waitFor, type Api } from '../helpers/lifecycle.ts';

let d: ChildDeployment;
let agent: ChildAgent;
let db: Db;
let layout: Layout;
let root: { dir: string };
let token: string;
const api: Api = { request: (...args) => d.api.request(...args) };

beforeAll(async () => {
  d = await startChildDeployment('svc-crash-');
  ({ agent, db, layout, root, token } = d);
});

afterAll(() => d?.stop());

/** Engine processes (serve or one-shot) working in a project's tenant or snapshot directories. */
function engineProcesses(projectId: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmd.includes('engine/main.ts') && cmd.includes(projectId)) pids.push(Number(entry));
    } catch {
      // Exited meanwhile.
    }
  }
  return pids;
}

/** Restarts the agent once every engine command the killed agent left has finished. */
async function restartAfterOrphansSettle(projectId: string): Promise<void> {
  await waitFor(() => engineProcesses(projectId).filter((pid) => !isServe(pid)).length === 0, 15_000);
  await agent.start();
}

function isServe(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('serve');
  } catch {
    return false;
  }
}

/** The truth on disk and in the process table: running iff an engine serves the directory. */
function truthOf(projectId: string): 'running' | 'sleeping' | 'stopped' {
  const serving = engineProcesses(projectId).filter(isServe);
  if (serving.length > 0) return 'running';
  return existsSync(layout.dataDir(projectId)) ? 'sleeping' : 'stopped';
}

const newProjectWithRows = (rows: string[]) => projectWithRows(api, token, rows);
const rowsOf = (projectId: string) => rowsOfProject(api, token, projectId);

/** Asserts that what DynamoDB records is what is true, before anyone asks (start-up reconciliation). */
async function expectRecordedTrue(projectId: string): Promise<void> {
  const recorded = (await getProject(db, projectId))!.state;
  expect(recorded).toBe(truthOf(projectId));
}

/** Waits until the tenant log has a line matching `pattern`. */
async function logShows(projectId: string, pattern: RegExp, ms = 10_000): Promise<boolean> {
  return waitFor(() => {
    try {
      return pattern.test(readFileSync(join(layout.logs, projectId, 'engine.log'), 'utf8'));
    } catch {
      return false;
    }
  }, ms, 2);
}

describe('SIGKILL of the agent', () => {
  it('in the middle of a wakeup: the data directory is intact and the recorded state true', async () => {
    const id = await newProjectWithRows(['a', 'b']);
    await sleep(api, token, id);
    const pending = call(api, 'POST', `/v0/projects/${id}/wakeup`, token);
    expect(await waitFor(() => existsSync(layout.runRecord(id)), 10_000, 1)).toBe(true);
    await agent.kill9();
    await pending;
    await restartAfterOrphansSettle(id);
    await expectRecordedTrue(id);
    expect((await call(api, 'GET', `/v0/projects/${id}`, token)).body.state).toBe(truthOf(id));
    expect(await rowsOf(id)).toEqual(['a', 'b']);
  });

  it('in the middle of a sleep: the data directory is intact and the recorded state true', async () => {
    const id = await newProjectWithRows(['c']);
    const pending = call(api, 'POST', `/v0/projects/${id}/sleep`, token);
    expect(await logShows(id, /stopping engine/)).toBe(true);
    await agent.kill9();
    await pending;
    await restartAfterOrphansSettle(id);
    await expectRecordedTrue(id);
    expect(await rowsOf(id)).toEqual(['c']);
  });

  it('with running engines: a live one is adopted, one killed meanwhile is recorded sleeping', async () => {
    const kept = await newProjectWithRows(['d']);
    const lost = await newProjectWithRows(['e']);
    const pidOf = (id: string) => (JSON.parse(readFileSync(layout.runRecord(id), 'utf8')) as { pid: number }).pid;
    const keptPid = pidOf(kept);
    const lostPid = pidOf(lost);
    await agent.kill9();
    expect(pidAlive(keptPid)).toBe(true);
    process.kill(lostPid, 'SIGKILL');
    await waitFor(() => !pidAlive(lostPid), 5000);
    await agent.start();
    // Recorded states are corrected at start, before anyone asks.
    expect((await getProject(db, kept))!.state).toBe('running');
    expect((await getProject(db, lost))!.state).toBe('sleeping');
    expect(existsSync(layout.runRecord(lost))).toBe(false);
    // Adopted, not restarted: the same process still serves, and sleep stops it.
    expect(pidOf(kept)).toBe(keptPid);
    expect(await rowsOf(kept)).toEqual(['d']);
    expect(pidOf(kept)).toBe(keptPid);
    await sleep(api, token, kept);
    expect(await waitFor(() => !pidAlive(keptPid), 5000)).toBe(true);
    expect(await rowsOf(lost)).toEqual(['e']);
  });

  it('in the middle of a snapshot: the data directory is intact, no half snapshot is recorded', async () => {
    const id = await newProjectWithRows(['f', 'g']);
    await sleep(api, token, id);
    const pending = call(api, 'POST', `/v0/projects/${id}/snapshots`, token, { label: 'crash' });
    expect(await logShows(id, /engine status: ok/)).toBe(true);
    await agent.kill9();
    await pending;
    await restartAfterOrphansSettle(id);
    await expectRecordedTrue(id);
    const listed = (await call(api, 'GET', `/v0/projects/${id}/snapshots`, token)).body.snapshots as { backup_dir: string }[];
    for (const s of listed) expect(existsSync(join(s.backup_dir, 'manifest.json'))).toBe(true);
    // The next snapshot works, and the data is what it was.
    expect((await call(api, 'POST', `/v0/projects/${id}/snapshots`, token, {})).status).toBe(201);
    expect(await rowsOf(id)).toEqual(['f', 'g']);
  });

  it('in the middle of a restore: the data directory is intact (old or restored), the state true', async () => {
    const id = await newProjectWithRows(['h']);
    await sleep(api, token, id);
    const snap = (await call(api, 'POST', `/v0/projects/${id}/snapshots`, token, {})).body;
    await wake(api, token, id);
    const address = (await call(api, 'GET', `/v0/projects/${id}/head`, token)).body.endpoint.address;
    await engineSql(address, "INSERT INTO t VALUES ('i')");
    await sleep(api, token, id);
    const pending = call(api, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snap.id });
    expect(await waitFor(() => existsSync(layout.restoreJournal(id)), 10_000, 1)).toBe(true);
    await agent.kill9();
    await pending;
    await restartAfterOrphansSettle(id);
    expect(existsSync(layout.restoreJournal(id))).toBe(false);
    await expectRecordedTrue(id);
    const rows = await rowsOf(id);
    expect([['h'], ['h', 'i']]).toContainEqual(rows);
  });
});

describe('an interrupted restore is repaired at start', () => {
  /** A sleeping project with a snapshot of one row, a later row, and what a restore did up to a crash. */
  async function prepared(): Promise<{ id: string; fresh: string; replaced: string }> {
    const id = await newProjectWithRows(['old']);
    await sleep(api, token, id);
    const snap = (await call(api, 'POST', `/v0/projects/${id}/snapshots`, token, {})).body;
    await wake(api, token, id);
    const address = (await call(api, 'GET', `/v0/projects/${id}/head`, token)).body.endpoint.address;
    await engineSql(address, "INSERT INTO t VALUES ('new')");
    await sleep(api, token, id);
    const name = `20260101T000000000Z-${snap.id}`;
    return { id, fresh: join(layout.tenantDir(id), `restoring-${name}`), replaced: join(layout.replacedRoot(id), name) };
  }

  /** The journal, then the engine's fresh directory: a restore up to the engine's output. */
  async function restoredUpToTheSwap(p: { id: string; fresh: string; replaced: string }): Promise<void> {
    const snapshotId = p.fresh.slice(p.fresh.lastIndexOf('-') + 1);
    const snap = (await call(api, 'GET', `/v0/projects/${p.id}/snapshots/${snapshotId}`, token)).body;
    const { writeJsonDurable } = await import('../../host-agent/tenants/files.ts');
    writeJsonDurable(layout.restoreJournal(p.id), { snapshot_id: snapshotId, fresh: p.fresh, replaced: p.replaced, started_at: new Date().toISOString() });
    const { spawnSync } = await import('node:child_process');
    const restored = spawnSync(ENGINE, ['restore', '--backup', snap.backup_dir, '--target', p.fresh, '--json']);
    expect(restored.status, restored.stdout.toString()).toBe(0);
  }

  it('between the two renames the swap is completed; before the first one the restore is undone', async () => {
    const between = await prepared();
    const before = await prepared();
    await agent.kill9();
    await restoredUpToTheSwap(between);
    mkdirSync(layout.replacedRoot(between.id), { recursive: true });
    renameSync(layout.dataDir(between.id), between.replaced);
    await restoredUpToTheSwap(before);
    await agent.start();

    expect(existsSync(layout.restoreJournal(between.id))).toBe(false);
    expect(existsSync(between.fresh)).toBe(false);
    expect(existsSync(join(between.replaced, 'meta.json'))).toBe(true);
    await expectRecordedTrue(between.id);
    expect(await rowsOf(between.id)).toEqual(['old']);

    expect(existsSync(layout.restoreJournal(before.id))).toBe(false);
    expect(existsSync(before.fresh)).toBe(false);
    // Undone: the fresh directory, never served, is moved aside and swept with the other leftovers.
    expect(existsSync(layout.unappliedRoot(before.id))).toBe(false);
    expect(agent.output).toContain(`tenants/${before.id}/unapplied/`);
    await expectRecordedTrue(before.id);
    expect(await rowsOf(before.id)).toEqual(['old', 'new']);
  });
});

describe('graceful agent stop', () => {
  it('stops every engine and records them sleeping', async () => {
    const a = await newProjectWithRows(['x']);
    const b = await newProjectWithRows(['y']);
    const pids = [a, b].map((id) => JSON.parse(readFileSync(layout.runRecord(id), 'utf8')).pid as number);
    await agent.stop();
    for (const pid of pids) expect(pidAlive(pid)).toBe(false);
    expect((await getProject(db, a))!.state).toBe('sleeping');
    expect((await getProject(db, b))!.state).toBe('sleeping');
    await agent.start();
    expect(await rowsOf(a)).toEqual(['x']);
  });
});
