/**
 * Crash safety of deleting a snapshot and freeing a previous data directory (docs/lifecycle.md
 * "Deleting a snapshot", "Previous data directories"): the host agent runs as its own process
 * (`bin/svc-agent`) and is SIGKILLed in the middle of a snapshot delete; after a restart each
 * snapshot is either whole (row and complete backup: it restores) or gone entirely (row, backup,
 * with its receipt), never half removed and restorable. A free of a previous directory interrupted
 * on either side of its rename is finished or dropped at start.
 */
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeJsonDurable } from '../../host-agent/tenants/files.ts';
import type { Layout } from '../../host-agent/tenants/layout.ts';
import { DISCARD_MARKER_SUFFIX } from '../../host-agent/tenants/replaced.ts';
import type { Db } from '../../shared/db/client.ts';
import { listReceipts, newReceipt } from '../../shared/db/receipts.ts';
import { deleteSnapshotRow, getSnapshot } from '../../shared/db/snapshots.ts';
import { startChildDeployment, type ChildAgent, type ChildDeployment } from '../helpers/child-agent.ts';
import { call, newProjectWithRows, rowsOf, sleep, type Api } from '../helpers/lifecycle.ts';

let d: ChildDeployment;
let agent: ChildAgent;
let db: Db;
let layout: Layout;
let token: string;
const api: Api = { request: (...args) => d.api.request(...args) };

beforeAll(async () => {
  // Debug: a restart waits for the backup sweep's line, which is debug when it removed nothing.
  d = await startChildDeployment('svc-deletions-crash-', { SVCD_LOG_LEVEL: 'debug' });
  ({ agent, db, layout, token } = d);
});

afterAll(() => d?.stop());

/** A sleeping project whose table holds `rows`, with `count` snapshots of that state. */
async function projectWithSnapshots(rows: string[], count: number): Promise<{ id: string; snaps: any[] }> {
  const id = await newProjectWithRows(api, token, rows, 'deletions-crash');
  await sleep(api, token, id);
  const snaps = [];
  for (let i = 0; i < count; i++) {
    const s = await call(api, 'POST', `/v0/projects/${id}/snapshots`, token, {});
    expect(s.status).toBe(201);
    snaps.push(s.body);
  }
  return { id, snaps };
}

/** The project's rows, read through a wakeup (asleep again afterwards). */
async function rowsAsleep(id: string): Promise<string[]> {
  const rows = await rowsOf(api, token, id);
  await sleep(api, token, id);
  return rows;
}

async function receiptsOf(id: string, op: string) {
  return (await listReceipts(db, id, 1000)).items.filter((r) => r.op === op);
}

/** Starts the agent again and waits for its sweep of backups without a snapshot row to have run. */
async function restart(): Promise<void> {
  const from = agent.output.length;
  await agent.start();
  expect(await agent.logLine(/swept backups without a snapshot row/, from, 20_000)).not.toBeNull();
}

describe('SIGKILL of the agent in the middle of a snapshot delete', () => {
  it('leaves each snapshot whole and restorable, or gone entirely with its receipt once the agent restarted', async () => {
    // Spread over the delete's ~30 ms on the development machine: before the agent gets it, around
    // its transaction, after it answered.
    const delays = [0, 15, 25, 32, 40, 60];
    const { id, snaps } = await projectWithSnapshots(['kept', 'too'], delays.length);
    const outcomes: string[] = [];
    for (const [i, delay] of delays.entries()) {
      const snap = snaps[i];
      const pending = call(api, 'DELETE', `/v0/projects/${id}/snapshots/${snap.id}`, token);
      await new Promise((r) => setTimeout(r, delay));
      await agent.kill9();
      const answered = await pending;
      await restart();

      const row = await getSnapshot(db, id, snap.id);
      const receipts = (await receiptsOf(id, 'snapshot.delete')).filter((r) => r.target === snap.id);
      if (row) {
        // Whole: its backup is complete, it restores, and nothing says it was deleted.
        outcomes.push(`${delay} ms: kept`);
        expect(answered.status).not.toBe(200);
        expect(receipts).toEqual([]);
        expect(existsSync(join(layout.backupDir(id, snap.id), 'manifest.json'))).toBe(true);
        const restored = await call(api, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snap.id });
        expect(restored.status, JSON.stringify(restored.body)).toBe(200);
        expect(await rowsAsleep(id)).toEqual(['kept', 'too']);
      } else {
        // Gone: the receipt was written with the row's removal; the start swept the backup.
        outcomes.push(`${delay} ms: deleted`);
        expect(receipts).toHaveLength(1);
        expect(existsSync(layout.backupDir(id, snap.id))).toBe(false);
        const restored = await call(api, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snap.id });
        expect(restored.status).toBe(404);
        expect((await call(api, 'GET', `/v0/projects/${id}/snapshots/${snap.id}`, token)).status).toBe(404);
      }
    }
    // Every outcome is one of the two; which ones a run sees depends on the machine's timing.
    expect(outcomes).toHaveLength(delays.length);
  }, 180_000);

  it('between the row and the backup directory: the next start removes the backup', async () => {
    const { id, snaps } = await projectWithSnapshots(['x'], 2);
    const [gone, kept] = snaps;
    await agent.kill9();
    // What a delete had done when it was killed: the row and its receipt, not yet the directory.
    const receipt = newReceipt({ project: id, op: 'snapshot.delete', target: gone.id, actor: 'acct_0000000000000001', request_id: 'req_crash', at: new Date().toISOString() });
    await deleteSnapshotRow(db, id, gone.id, receipt);
    expect(existsSync(layout.backupDir(id, gone.id))).toBe(true);
    await restart();
    expect(existsSync(layout.backupDir(id, gone.id))).toBe(false);
    expect(agent.output).toContain(`snapshots/${id}/${gone.id}`);
    expect((await call(api, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: gone.id })).status).toBe(404);
    // The other snapshot, recorded, is untouched.
    expect(existsSync(join(layout.backupDir(id, kept.id), 'manifest.json'))).toBe(true);
    expect((await call(api, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: kept.id })).status).toBe(200);
  });
});

describe('an interrupted free of a previous directory is finished or dropped at start', () => {
  it('after its rename the receipt is written and the directory removed; before it the directory stays', async () => {
    const { id, snaps } = await projectWithSnapshots(['y'], 1);
    for (let i = 0; i < 2; i++) expect((await call(api, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snaps[0].id })).status).toBe(200);
    const listed = (await call(api, 'GET', `/v0/projects/${id}/replaced`, token)).body.replaced as any[];
    expect(listed).toHaveLength(2);
    const [committed, uncommitted] = listed;
    await agent.kill9();
    mkdirSync(layout.discardingRoot(id), { recursive: true });
    const receipts = [committed, uncommitted].map((entry) =>
      newReceipt({ project: id, op: 'replaced.delete', target: entry.name, actor: 'acct_0000000000000001', request_id: 'req_crash', at: new Date().toISOString() }),
    );
    for (const [i, entry] of [committed, uncommitted].entries()) {
      writeJsonDurable(join(layout.discardingRoot(id), `${entry.name}${DISCARD_MARKER_SUFFIX}`), receipts[i]);
    }
    renameSync(committed.path, join(layout.discardingRoot(id), committed.name));
    await restart();

    const now = (await call(api, 'GET', `/v0/projects/${id}/replaced`, token)).body.replaced;
    expect(now).toEqual([uncommitted]);
    expect(existsSync(layout.discardingRoot(id))).toBe(false);
    expect((await receiptsOf(id, 'replaced.delete')).map((r) => r.id)).toEqual([receipts[0]!.id]);
    // The one left is freed normally afterwards.
    expect((await call(api, 'DELETE', `/v0/projects/${id}/replaced/${uncommitted.name}`, token)).status).toBe(200);
    expect((await call(api, 'GET', `/v0/projects/${id}/replaced`, token)).body.replaced).toEqual([]);
  });
});
