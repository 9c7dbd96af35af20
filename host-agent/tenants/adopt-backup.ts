/**
 * A backup directory that arrived from outside becomes a snapshot of the project (docs/lifecycle.md
 * "Export and import"): an imported archive, an off-machine copy brought to another machine.
 *
 * 1. The directory is renamed (copied and checked, across file systems) to `snapshots/<p>/<new id>.staging-<hex>` (a name the start's sweep
 *    removes, "Leftovers") and given to the engine user;
 * 2. the engine's `verify` checks it (a corrupt one is 409 `conflict`, exit 5, and is removed);
 * 3. a durable rename to `snapshots/<p>/<new id>/`, then its row (offsite `pending`). A crash before
 *    the row leaves a backup without a row, which the start's sweep removes too.
 *
 * The record's values come from the engine's verify output and the backup's manifest (which the
 * engine's backup wrote and verify has just checked): `lineage.root_digest` is the checkpoint digest,
 * `source_data_dir` the project's data directory here (where a restore of it goes).
 */
import { mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { newSnapshotId, putSnapshot, type Snapshot } from '../../shared/db/snapshots.ts';
import { randomHex } from '../../shared/ids.ts';
import { ENGINE_PIN } from '../../shared/schemas/projects.ts';
import { nowIso } from '../../shared/time.ts';
import { copyBackupDir } from '../backups/fs-store.ts';
import { readManifest } from '../backups/manifest.ts';
import { verifyCommand } from '../engine-commands.ts';
import { renameDurable } from './files.ts';
import type { SnapshotDeps } from './snapshot.ts';

/** Moves `from` to `to`: a rename, or a checked copy (then `from` removed) across file systems. */
async function moveInto(from: string, to: string): Promise<void> {
  try {
    renameSync(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
    await copyBackupDir(from, to, 'the backup directory to adopt');
    rmSync(from, { recursive: true, force: true });
  }
}

/** What adopting needs: what a snapshot needs, and how a directory is given to the engine user. */
export interface AdoptDeps extends SnapshotDeps {
  /** Makes a directory tree the agent wrote the engine user's (nothing to do when engines run as the agent's user). */
  giveToEngine: (dir: string) => void;
}

/**
 * Verifies the backup directory `sourceDir` (on the same file system as `SVCD_ROOT`; it is moved, not
 * copied) and records it as a new snapshot of the project labelled `label`; answers the snapshot.
 * `claim` is told the new id first (./holds.ts). The caller ships it (`Backups.afterSnapshot`).
 */
export async function adoptBackup(deps: AdoptDeps, projectId: string, sourceDir: string, label: string | null, claim: (snapshotId: string) => void = () => {}): Promise<Snapshot> {
  const { layout, engines } = deps;
  const createdAt = deps.now();
  const snapshotId = newSnapshotId(createdAt);
  claim(snapshotId);
  mkdirSync(layout.snapshotRoot(projectId), { recursive: true });
  const staging = join(layout.snapshotRoot(projectId), `${snapshotId}.staging-${randomHex(8)}`);
  const backupDir = layout.backupDir(projectId, snapshotId);
  let recorded = false;
  try {
    await moveInto(sourceDir, staging);
    deps.giveToEngine(staging);
    const verified = await engines.run(projectId, verifyCommand, { backup: staging }, 'verify', engines.longTimeoutMs);
    const manifest = (await readManifest(staging)).document;
    renameDurable(staging, backupDir);
    const snapshot: Snapshot = {
      id: snapshotId,
      project: projectId,
      label,
      created_at: nowIso(createdAt),
      engine_version: typeof manifest.engine_version === 'string' ? manifest.engine_version : (deps.pin.engineVersion() ?? ENGINE_PIN),
      source_data_dir: layout.dataDir(projectId),
      backup_dir: backupDir,
      lineage: {
        catalog_version: manifest.catalog_version,
        directory_lineage: verified.directory_lineage,
        logical_time_micros: manifest.logical_time_micros,
        root_digest: verified.checkpoint_digest,
        visible_csn: verified.visible_csn,
      },
      backup: {
        backup_path: backupDir,
        checkpoint_digest: verified.checkpoint_digest,
        file_count: verified.file_count,
        total_bytes: verified.total_bytes,
        status: 'verified',
        visible_csn: verified.visible_csn,
      },
      offsite: { state: 'pending', completed_at: null },
      automatic: false,
    };
    await putSnapshot(deps.db, snapshot);
    recorded = true;
    deps.logs.append(projectId, `snapshot ${snapshotId} adopted from a backup directory that came from outside (${label ?? 'no label'})`);
    return snapshot;
  } finally {
    if (!recorded) {
      rmSync(staging, { recursive: true, force: true });
      rmSync(backupDir, { recursive: true, force: true });
    }
  }
}
