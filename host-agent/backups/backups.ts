/**
 * Off-machine copies of snapshots (docs/lifecycle.md "Off-machine copies"), on `AgentContext.backups`:
 * every snapshot this agent takes is shipped to the backup store (./store.ts) after it is recorded,
 * its row's `offsite` says when the copy completed, and the project item carries the recovery point
 * (`last_backup_at`) and the newest snapshot's off-machine state.
 *
 * - `ship` runs once per snapshot at a time (a second call joins the first). The row is written
 *   `complete` only after the store marked the copy complete; a row deleted meanwhile has its copy
 *   removed again, so no copy outlives its snapshot.
 * - `remove` waits for a ship of the same snapshot in flight, then removes the copy.
 * - `resume` (at start, in the background) ships every snapshot of this agent's projects that is not
 *   complete, and removes copies whose row is gone (a crash between a row's deletion and its copy's).
 */
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Db } from '../../shared/db/client.ts';
import { getProject } from '../../shared/db/projects.ts';
import {
  backupFieldsOf,
  getSnapshot,
  listSnapshots,
  recordedBackupOf,
  setSnapshotOffsite,
  writeBackupFields,
  type Offsite,
  type Snapshot,
} from '../../shared/db/snapshots.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import { ID_PATTERNS, randomHex } from '../../shared/ids.ts';
import { nowIso } from '../../shared/time.ts';
import { renameDurable } from '../tenants/files.ts';
import type { Layout } from '../tenants/layout.ts';
import type { BackupStore } from './store.ts';

export type { Offsite } from '../../shared/db/snapshots.ts';

/** What the backups need. */
export interface BackupsDeps {
  /** The deployment's store, or null when this agent has none (`fs` without SVCD_BACKUP_DIR). */
  store: BackupStore | null;
  db: Db;
  agentId: string;
  layout: Layout;
  log: (line: string) => void;
  now: () => number;
  /** Makes a fetched directory the engine user's (docs/lifecycle.md "Engine isolation"); default: nothing to do. */
  giveToEngine?: (dir: string) => void;
}

const UNAVAILABLE: Offsite = { state: 'unavailable', completed_at: null };
const RETRY_MAX_MS = 5 * 60_000;

/** The off-machine copies of this agent's snapshots. */
export class Backups {
  readonly store: BackupStore | null;
  readonly #deps: BackupsDeps;
  readonly #inFlight = new Map<string, Promise<Offsite>>();
  readonly #refreshing = new Map<string, Promise<void>>();
  #closed = false;

  constructor(deps: BackupsDeps) {
    this.#deps = deps;
    this.store = deps.store;
  }

  /** Whether this agent makes off-machine copies at all. */
  get available(): boolean {
    return this.store !== null;
  }

  /** The state a new snapshot is recorded with. */
  initialOffsite(): Offsite {
    return this.store ? { state: 'pending', completed_at: null } : UNAVAILABLE;
  }

  /**
   * Copies the snapshot's backup directory to the store and records the copy complete (or
   * `unavailable` without a store). One in flight per snapshot: a second call joins the first.
   * 404 when the snapshot has no row.
   */
  ship(projectId: string, snapshotId: string): Promise<Offsite> {
    const key = `${projectId}/${snapshotId}`;
    const running = this.#inFlight.get(key);
    if (running) return running;
    const shipping = this.#ship(projectId, snapshotId).finally(() => this.#inFlight.delete(key));
    this.#inFlight.set(key, shipping);
    return shipping;
  }

  async #ship(projectId: string, snapshotId: string): Promise<Offsite> {
    const { db, layout, now, store } = { ...this.#deps, store: this.store };
    const snapshot = await getSnapshot(db, projectId, snapshotId);
    if (!snapshot) throw errors.notFound(`snapshot ${snapshotId} not found`);
    if (snapshot.offsite.state === 'complete') return snapshot.offsite;
    if (!store) {
      if (snapshot.offsite.state !== 'unavailable') await setSnapshotOffsite(db, projectId, snapshotId, UNAVAILABLE);
      await this.refresh(projectId);
      return UNAVAILABLE;
    }
    if (!(await store.isComplete(projectId, snapshotId))) {
      const backupDir = layout.backupDir(projectId, snapshotId);
      // Taken on another machine (a project that moved here): that machine's copy is the one to ship.
      if (!existsSync(backupDir)) throw errors.notFound(`snapshot ${snapshotId} has no backup directory on this host to copy`);
      await store.put(projectId, snapshotId, backupDir);
    }
    const offsite: Offsite = { state: 'complete', completed_at: nowIso(now()) };
    if (!(await setSnapshotOffsite(db, projectId, snapshotId, offsite))) {
      // Deleted while it was copied: the copy goes too.
      await store.remove(projectId, snapshotId);
      throw errors.notFound(`snapshot ${snapshotId} was deleted while it was copied`);
    }
    this.#deps.log(`agent: snapshot ${snapshotId} of ${projectId} copied off the machine (${store.kind})`);
    await this.refresh(projectId);
    return offsite;
  }

  /**
   * `ship` in the background, tried again after a growing pause (up to 5 minutes) while it fails and
   * the agent runs; what is still pending at the next start is shipped by `resume`.
   */
  shipInBackground(projectId: string, snapshotId: string, attempt = 0): void {
    this.ship(projectId, snapshotId).catch((err: unknown) => {
      if (err instanceof ServiceError && err.code === 'not_found') return;
      this.#deps.log(`agent: copying snapshot ${snapshotId} of ${projectId} off the machine failed: ${(err as Error).message}`);
      if (this.#closed) return;
      setTimeout(() => this.shipInBackground(projectId, snapshotId, attempt + 1), Math.min(RETRY_MAX_MS, 1000 * 2 ** attempt)).unref();
    });
  }

  /** The snapshot as answered right after it was taken: shipped in the background, or recorded `unavailable`. */
  async afterSnapshot(snapshot: Snapshot): Promise<Snapshot> {
    if (!this.store) {
      await setSnapshotOffsite(this.#deps.db, snapshot.project, snapshot.id, UNAVAILABLE);
      this.refreshInBackground(snapshot.project);
      return { ...snapshot, offsite: UNAVAILABLE };
    }
    this.refreshInBackground(snapshot.project);
    this.shipInBackground(snapshot.project, snapshot.id);
    return snapshot;
  }

  /**
   * Downloads the complete off-machine copy of a snapshot into `dir` (made here; its parent too),
   * checked against its manifest. It is fetched under a staging name beside `dir` (which the start's
   * sweep removes, docs/lifecycle.md "Leftovers") and renamed into place once checked: a crash
   * never leaves a half-fetched `dir`. `check: false` leaves the check to the engine, whose restore
   * verifies a backup before it uses it (docs/engine.md): the moves restore what they fetch at once.
   */
  async fetchInto(projectId: string, snapshotId: string, dir: string, { check = true } = {}): Promise<void> {
    if (!this.store) throw errors.orchestrator('this host agent has no off-machine backup store (SVCD_BACKUP_DIR, or the s3 backend)');
    await mkdir(dirname(dir), { recursive: true });
    const staging = `${dir}.staging-${randomHex(8)}`;
    try {
      await this.store.fetch(projectId, snapshotId, staging, check);
      this.#deps.giveToEngine?.(staging);
      renameDurable(staging, dir);
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
  }

  /** Removes the snapshot's copy once any ship of it in flight has settled; then the project's fields follow. */
  async remove(projectId: string, snapshotId: string): Promise<void> {
    await this.#inFlight.get(`${projectId}/${snapshotId}`)?.catch(() => {});
    if (this.store) await this.store.remove(projectId, snapshotId);
    await this.refresh(projectId);
  }

  /** `remove`, its failure logged: the next start removes a copy whose row is gone. */
  async removeQuietly(projectId: string, snapshotId: string): Promise<void> {
    await this.remove(projectId, snapshotId).catch((err: Error) => this.#deps.log(`agent: removing the off-machine copy of ${snapshotId} failed: ${err.message}; removed at the next start`));
  }

  /**
   * Writes the project's backup fields from its snapshot rows (one at a time per project), on
   * condition that the recovery point read is still the recorded one; tried again when another
   * write moved it meanwhile.
   */
  refresh(projectId: string): Promise<void> {
    const previous = this.#refreshing.get(projectId) ?? Promise.resolve();
    const next = previous.then(() => this.#refresh(projectId));
    const settled = next.catch(() => {});
    this.#refreshing.set(projectId, settled);
    void settled.then(() => {
      if (this.#refreshing.get(projectId) === settled) this.#refreshing.delete(projectId);
    });
    return next;
  }

  refreshInBackground(projectId: string): void {
    this.refresh(projectId).catch((err: Error) => this.#deps.log(`agent: recording the backup state of ${projectId} failed: ${err.message}`));
  }

  async #refresh(projectId: string): Promise<void> {
    const { db } = this.#deps;
    for (let attempt = 0; attempt < 5; attempt++) {
      const recorded = await recordedBackupOf(db, projectId);
      if (recorded === undefined) return;
      const fields = await backupFieldsOf(db, projectId);
      if (await writeBackupFields(db, projectId, fields, recorded)) return;
    }
  }

  /**
   * At agent start, in the background: for every project this agent holds snapshots of, ship those
   * whose copy is not complete (or record them `unavailable` without a store), and remove copies
   * whose snapshot row is gone. Answers once all of it has been tried.
   */
  async resume(): Promise<void> {
    let projects: string[];
    try {
      projects = readdirSync(this.#deps.layout.snapshots).filter((name) => ID_PATTERNS.prj.test(name));
    } catch {
      return;
    }
    for (const projectId of projects) {
      if (this.#closed) return;
      try {
        await this.#resumeProject(projectId);
      } catch (err) {
        this.#deps.log(`agent: resuming the off-machine copies of ${projectId} failed: ${(err as Error).message}; tried again at the next start`);
      }
    }
  }

  async #resumeProject(projectId: string): Promise<void> {
    const { db, agentId } = this.#deps;
    const project = await getProject(db, projectId);
    if (!project || project.agent_id !== agentId) return;
    const rows = await allSnapshots(db, projectId);
    const ids = new Set(rows.map((s) => s.id));
    if (this.store) {
      for (const id of await this.store.list(projectId)) {
        // A row is written before any byte of its copy: one read after the listing is the judge.
        if (ids.has(id) || this.#inFlight.has(`${projectId}/${id}`) || (await getSnapshot(db, projectId, id))) continue;
        await this.store.remove(projectId, id);
        this.#deps.log(`agent: removed the off-machine copy of ${id} of ${projectId}, whose snapshot is deleted`);
      }
    }
    for (const row of rows) {
      if (this.#closed) return;
      if (row.offsite.state === 'complete' || (!this.store && row.offsite.state === 'unavailable')) continue;
      await this.ship(projectId, row.id).catch((err: Error) => {
        this.#deps.log(`agent: copying snapshot ${row.id} of ${projectId} off the machine failed: ${err.message}`);
        this.shipInBackground(projectId, row.id, 1);
      });
    }
    await this.refresh(projectId);
  }

  /** Stops the retries (the agent is stopping). */
  close(): void {
    this.#closed = true;
  }
}

/** Every snapshot row of a project, newest first. */
async function allSnapshots(db: Db, projectId: string): Promise<Snapshot[]> {
  const rows: Snapshot[] = [];
  let cursor: string | undefined;
  do {
    const page = await listSnapshots(db, projectId, 1000, cursor);
    rows.push(...page.items);
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return rows;
}
