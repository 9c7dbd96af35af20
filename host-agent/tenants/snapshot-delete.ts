/**
 * Deleting a snapshot (docs/lifecycle.md "Deleting a snapshot"): its row goes first, in one
 * transaction with its `snapshot.delete` receipt, then its backup directory. Without a row a backup
 * is never restored (restore reads the row first) nor listed, so a crash between the two, or in the
 * middle of removing the directory, leaves nothing restorable half removed: the start's sweep of
 * backups without a snapshot row (./leftovers.ts) removes the rest.
 *
 * Also what a project deletion reuses: `removeBackupDir` frees one backup directory by id.
 */
import { rm } from 'node:fs/promises';
import type { Db } from '../../shared/db/client.ts';
import { newReceipt } from '../../shared/db/receipts.ts';
import { deleteSnapshotRow, type Snapshot } from '../../shared/db/snapshots.ts';
import { nowIso } from '../../shared/time.ts';
import type { Layout } from './layout.ts';
import type { TenantLogs } from './logs.ts';
import type { Deletion } from './replaced.ts';

/** What deleting a snapshot needs. */
export interface SnapshotDeleteDeps {
  db: Db;
  layout: Layout;
  logs: TenantLogs;
  now: () => number;
  log: (line: string) => void;
}

/**
 * Removes the backup directory of `snapshotId`, by the layout's path for the two validated ids
 * (never a path read from a row). Answers false when it could not, after logging why: the start's
 * sweep removes it once its row is gone.
 */
export async function removeBackupDir(deps: Pick<SnapshotDeleteDeps, 'layout' | 'log'>, projectId: string, snapshotId: string): Promise<boolean> {
  const dir = deps.layout.backupDir(projectId, snapshotId);
  try {
    await rm(dir, { recursive: true, force: true });
    return true;
  } catch (err) {
    deps.log(`agent: removing the backup directory ${dir} failed: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}; swept at the next start`);
    return false;
  }
}

/**
 * Deletes snapshot `snapshotId` of the project: row and receipt, then its backup directory. Answers
 * the snapshot as it was recorded; 404 when the project has none by that id. The caller holds the
 * project's queue and has refused a snapshot being restored or taken.
 */
export async function removeSnapshot(deps: SnapshotDeleteDeps, projectId: string, snapshotId: string, deletion: Deletion): Promise<Snapshot> {
  const receipt = newReceipt({ project: projectId, op: 'snapshot.delete', target: snapshotId, actor: deletion.actor, request_id: deletion.requestId, at: nowIso(deps.now()) });
  const snapshot = await deleteSnapshotRow(deps.db, projectId, snapshotId, receipt);
  const removed = await removeBackupDir(deps, projectId, snapshotId);
  deps.logs.append(projectId, `snapshot ${snapshotId} deleted on request ${deletion.requestId}${removed ? '' : '; its backup directory is left for the next start'}`);
  return snapshot;
}
