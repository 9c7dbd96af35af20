/**
 * Restore of a snapshot and its repair after a crash (docs/lifecycle.md "Crash safety: agent start").
 * The engine restores the snapshot into a fresh directory, then two renames swap it in (`data/` →
 * `replaced/<ts>-<snap>/`, fresh → `data/`). The journal written first lets the agent's start finish
 * or undo a restore a crash interrupted. Nothing is deleted; the tenant stays asleep.
 */
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative } from 'node:path';
import { getSnapshot, type SnapshotBackup } from '../../shared/db/snapshots.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import { nowIso } from '../../shared/time.ts';
import { restoreCommand, statusCommand } from '../engine-commands.ts';
import { readJsonRecord, removeRecord, renameDurable, writeJsonDurable } from './files.ts';
import { dirStamp, RESTORE_STAGING_PREFIX, type Layout } from './layout.ts';
import type { TenantLogs } from './logs.ts';
import type { SnapshotDeps } from './snapshot.ts';

/** What a restore did. */
export interface Restored {
  snapshotId: string;
  restoredAt: string;
  dataDir: string;
  /** Where the previous data directory went; null when there was none. */
  replacedDir: string | null;
  /** The engine's restore output. */
  restoreOutput: Record<string, unknown>;
  /** The snapshot's backup record. */
  backup: SnapshotBackup;
}

/**
 * What a restore needs: what any engine command on a sleeping tenant needs (snapshot.ts), and where
 * a backup directory this machine does not hold comes from (the off-machine copy of a project that
 * moved here, docs/durability.md); without it such a restore is 404.
 */
export type RestoreDeps = SnapshotDeps & { fetchBackup?: (projectId: string, snapshotId: string, intoDir: string) => Promise<void> };

/** A backup directory to restore: the snapshot it is (for names and logs) and the engine's record of it. */
export interface BackupToRestore {
  snapshotId: string;
  backupDir: string;
  backup: SnapshotBackup;
}

/** Swaps the snapshot's backup in as the sleeping tenant's data directory (the caller holds the project's queue). */
export async function restoreSnapshot(deps: RestoreDeps, projectId: string, snapshotId: string): Promise<Restored> {
  const snapshot = await getSnapshot(deps.db, projectId, snapshotId);
  if (!snapshot) throw errors.notFound(`snapshot ${snapshotId} not found`);
  if (deps.engines.get(projectId)) throw new ServiceError('tenant_running', 'the tenant is running: sleep it before restoring');
  // This machine's copy (the row's `backup_dir` names the machine that took it), fetched from the
  // off-machine store when the project came here after the snapshot was taken.
  const backupDir = deps.layout.backupDir(projectId, snapshotId);
  if (!existsSync(backupDir)) {
    if (!deps.fetchBackup) throw errors.notFound(`snapshot ${snapshotId} has no backup directory on this host`);
    await deps.fetchBackup(projectId, snapshotId, backupDir);
    // Fetched by the agent: the snapshot root becomes the engine user's again (docs/lifecycle.md "Engine isolation").
    deps.engines.prepare(projectId);
  }
  return restoreBackup(deps, projectId, { snapshotId, backupDir, backup: snapshot.backup });
}

/** Swaps a backup directory in as the sleeping tenant's data directory (the caller holds the project's queue). */
export async function restoreBackup(deps: RestoreDeps, projectId: string, { snapshotId, backupDir, backup }: BackupToRestore): Promise<Restored> {
  const { layout, engines } = deps;
  if (engines.get(projectId)) throw new ServiceError('tenant_running', 'the tenant is running: sleep it before restoring');
  await deps.pin.ensure();
  const tenantDir = layout.tenantDir(projectId);
  const dataDir = layout.dataDir(projectId);
  // The engine restores into `data` inside a staging directory only the engine user may use
  // (docs/lifecycle.md "Engine isolation"): it writes nowhere in the agent's own `tenants/<p>/`.
  const staging = join(tenantDir, `${RESTORE_STAGING_PREFIX}${dirStamp(deps.now())}-${snapshotId}`);
  const fresh = join(staging, 'data');
  mkdirSync(tenantDir, { recursive: true });
  // The engine restores into a fresh directory and needs no lock on data/; the swap does. An engine
  // this agent does not know of (none should exist) would answer lock_held here: 409, nothing moved.
  if (existsSync(dataDir)) await engines.run(projectId, statusCommand, { dataDir }, 'restore', engines.startTimeoutMs);
  const journal = { snapshot_id: snapshotId, fresh, started_at: nowIso(deps.now()) };
  writeJsonDurable(layout.restoreJournal(projectId), journal);
  let restoreOutput: Record<string, unknown>;
  try {
    engines.privateDir(staging);
    restoreOutput = await engines.run(projectId, restoreCommand, { backup: backupDir, target: fresh }, 'restore', engines.longTimeoutMs);
  } catch (err) {
    repairRestore(layout, deps.logs, projectId);
    rmSync(staging, { recursive: true, force: true });
    throw err;
  }
  // The commit point: once data/ has moved aside, the agent's start rolls the swap forward. The
  // previous directory's name records when it moved and which snapshot replaced it
  // (./replaced.ts lists them), journaled before the move.
  const hadData = existsSync(dataDir);
  const replaced = join(layout.replacedRoot(projectId), `${dirStamp(deps.now())}-${snapshotId}`);
  if (hadData) {
    writeJsonDurable(layout.restoreJournal(projectId), { ...journal, replaced });
    mkdirSync(layout.replacedRoot(projectId), { recursive: true });
    renameDurable(dataDir, replaced);
  }
  renameDurable(fresh, dataDir);
  removeRecord(layout.restoreJournal(projectId));
  // Empty now; a crash before this leaves it to the start's sweep of `restoring-…` directories.
  rmSync(staging, { recursive: true, force: true });
  // The restored directory is the engine user's alone, as every data directory (mode 0700).
  engines.prepare(projectId);
  const restoredAt = nowIso(deps.now());
  deps.logs.append(projectId, `restored snapshot ${snapshotId}; previous data directory retained in ${hadData ? replaced : '(none)'}`);
  return { snapshotId, restoredAt, dataDir, replacedDir: hadData ? replaced : null, restoreOutput, backup };
}

/**
 * Finishes or undoes a restore a crash interrupted, from its journal and what is on disk. Before the
 * commit point (data/ still in place) the fresh directory is moved aside to `unapplied/`; after it
 * (data/ moved to replaced/) the fresh directory is renamed into data/. Nothing is deleted.
 */
export function repairRestore(layout: Layout, logs: TenantLogs, projectId: string): void {
  const journalPath = layout.restoreJournal(projectId);
  const journal = readJsonRecord(journalPath);
  if (!journal) {
    removeRecord(journalPath);
    return;
  }
  const tenantDir = layout.tenantDir(projectId);
  const dataDir = layout.dataDir(projectId);
  const fresh = typeof journal.fresh === 'string' && isInside(tenantDir, journal.fresh) ? journal.fresh : null;
  const replaced = typeof journal.replaced === 'string' && isInside(tenantDir, journal.replaced) ? journal.replaced : null;
  const freshThere = fresh !== null && existsSync(fresh);
  if (!existsSync(dataDir)) {
    if (freshThere) {
      renameDurable(fresh, dataDir);
      logs.append(projectId, `interrupted restore of ${String(journal.snapshot_id)} completed at start`);
    } else if (replaced !== null && existsSync(replaced)) {
      renameDurable(replaced, dataDir);
      logs.append(projectId, `interrupted restore of ${String(journal.snapshot_id)} undone at start`);
    }
  } else if (freshThere) {
    // `fresh` is `restoring-<ts>-<snap>/data`, or `restoring-<ts>-<snap>` itself in a journal of an older agent.
    const staging = basename(fresh) === 'data' ? basename(dirname(fresh)) : basename(fresh);
    const unapplied = join(layout.unappliedRoot(projectId), staging.replace(/^restoring-/, ''));
    mkdirSync(dirname(unapplied), { recursive: true });
    renameDurable(fresh, unapplied);
    logs.append(projectId, `interrupted restore of ${String(journal.snapshot_id)} undone; its directory kept in ${unapplied}`);
  }
  removeRecord(journalPath);
}

/** Whether `child` lies strictly below `parent` (a journal names only paths of its own tenant). */
function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}
