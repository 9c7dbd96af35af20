/**
 * Automatic backups (docs/lifecycle.md "Automatic sleep and backups"). After a sleep of a project
 * whose `backup.on_sleep` is set — any sleep: the API's, the automatic one — and in the same turn of
 * its queue, the agent compares the engine's offline `status` with the lineage of the project's
 * newest automatic snapshot; when the data changed (`visible_csn` or `root_digest` differ) or there
 * is none, it takes a snapshot labelled `auto` (`automatic: true`), verified like every snapshot.
 * Then, outside the turn: the snapshot is copied off the machine (`ship`, host-agent/backups/), and
 * once that copy is complete (or the agent has no store at all) the automatic snapshots past the
 * project's `keep`, oldest first, are deleted through the normal receipted deletion (actor
 * `system`). A manual snapshot is never deleted, and none is pruned while the newest copy is not
 * off the machine, so a failing store never leaves fewer recovery points than before.
 */
import { existsSync } from 'node:fs';
import type { Db } from '../../shared/db/client.ts';
import { getProject } from '../../shared/db/projects.ts';
import { listSnapshots, type Offsite, type Snapshot, type SnapshotLineage } from '../../shared/db/snapshots.ts';
import { ServiceError } from '../../shared/errors.ts';
import { newRequestId } from '../../shared/ids.ts';
import type { Log } from '../../shared/log.ts';
import { statusCommand } from '../engine-commands.ts';
import type { Deletion } from './replaced.ts';
import type { SleepTurn } from './sleep.ts';

/** The label of an automatic snapshot. */
export const AUTO_LABEL = 'auto';

/** The receipts' actor of what the agent deletes on its own. */
export const SYSTEM_ACTOR = 'system';

/** What the automatic backups need. */
export interface AutoBackupDeps {
  db: Db;
  agentId: string;
  log: Log;
  /** Copies a recorded snapshot off the machine; answers its off-machine state (host-agent/backups/backups.ts `ship`). */
  ship: (projectId: string, snapshotId: string) => Promise<Offsite>;
  /** `ship` again later, with retries, after it failed. */
  shipLater: (projectId: string, snapshotId: string) => void;
  /** The normal snapshot deletion: row and receipt, backup directory, off-machine copy. */
  deleteSnapshot: (projectId: string, snapshotId: string, deletion: Deletion) => Promise<unknown>;
}

/** Whether the data directory's status says the same data as `lineage`. */
export function sameData(lineage: SnapshotLineage, status: Pick<SnapshotLineage, 'visible_csn' | 'root_digest'>): boolean {
  return lineage.visible_csn === status.visible_csn && lineage.root_digest === status.root_digest;
}

/** The project's automatic snapshots, newest first. */
export async function automaticSnapshots(db: Db, projectId: string): Promise<Snapshot[]> {
  const found: Snapshot[] = [];
  let cursor: string | undefined;
  do {
    const page = await listSnapshots(db, projectId, 1000, cursor);
    found.push(...page.items.filter((s) => s.automatic));
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return found;
}

/** The automatic backups of this agent's projects. */
export class AutoBackups {
  readonly #deps: AutoBackupDeps;
  /** Shipping and pruning still running (awaited by tests and the agent's stop). */
  readonly #pending = new Set<Promise<void>>();

  constructor(deps: AutoBackupDeps) {
    this.#deps = deps;
  }

  /** The after-sleep step (./sleep.ts): in the project's turn, the snapshot when the data changed. Never throws. */
  async afterSleep(projectId: string, turn: SleepTurn): Promise<void> {
    const { db, agentId, log } = this.#deps;
    try {
      const project = await getProject(db, projectId);
      const policy = project?.backup;
      if (!project || project.agent_id !== agentId || !policy?.on_sleep) return;
      const { layout, engines, pin } = turn.parts;
      const dataDir = layout.dataDir(projectId);
      if (!existsSync(dataDir)) return;
      await pin.ensure();
      const [status, automatic] = await Promise.all([engines.run(projectId, statusCommand, { dataDir }, 'auto-backup', engines.startTimeoutMs), automaticSnapshots(db, projectId)]);
      const newest = automatic[0];
      if (newest && sameData(newest.lineage, status)) return;
      const snapshot = await turn.snapshot(AUTO_LABEL, { automatic: true, status });
      log(`agent: automatic snapshot ${snapshot.id} of ${projectId} taken after its sleep (visible_csn ${snapshot.lineage.visible_csn})`, {
        level: 'info',
        event: 'auto_backup',
        project_id: projectId,
        snapshot_id: snapshot.id,
      });
      this.#track(this.#afterwards(projectId, snapshot.id, policy.keep));
    } catch (err) {
      // The tenant stays asleep and whole; the next sleep that follows writes tries again.
      log(`agent: the automatic backup of ${projectId} failed: ${(err as Error).message}`);
    }
  }

  /** Answers once every shipping and pruning begun so far has settled. */
  async settled(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  #track(work: Promise<void>): void {
    this.#pending.add(work);
    void work.finally(() => this.#pending.delete(work));
  }

  /** Outside the turn: the copy off the machine, then the automatic snapshots past `keep`. Never throws. */
  async #afterwards(projectId: string, snapshotId: string, keep: number): Promise<void> {
    const { db, log } = this.#deps;
    let offsite: Offsite;
    try {
      offsite = await this.#deps.ship(projectId, snapshotId);
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'not_found') return;
      log(`agent: copying the automatic snapshot ${snapshotId} of ${projectId} off the machine failed: ${(err as Error).message}; tried again later, older automatic snapshots kept meanwhile`);
      this.#deps.shipLater(projectId, snapshotId);
      return;
    }
    if (offsite.state === 'pending') return;
    try {
      const past = (await automaticSnapshots(db, projectId)).slice(keep);
      // Oldest first: an interruption leaves the newest ones.
      for (const old of past.reverse()) await this.#prune(projectId, old.id);
    } catch (err) {
      log(`agent: pruning the automatic snapshots of ${projectId} failed: ${(err as Error).message}; pruned after its next automatic backup`);
    }
  }

  async #prune(projectId: string, snapshotId: string): Promise<void> {
    try {
      await this.#deps.deleteSnapshot(projectId, snapshotId, { actor: SYSTEM_ACTOR, requestId: newRequestId() });
      this.#deps.log(`agent: automatic snapshot ${snapshotId} of ${projectId} deleted (past the project's backup.keep)`, { level: 'info', event: 'auto_backup_prune', project_id: projectId, snapshot_id: snapshotId });
    } catch (err) {
      // Deleted meanwhile (404), or being restored (409): left for the next time.
      if (err instanceof ServiceError && (err.code === 'not_found' || err.code === 'conflict')) return;
      throw err;
    }
  }
}
