/**
 * Snapshots (docs/lifecycle.md "Snapshot record"): a verified backup of the sleeping tenant's data
 * directory, recorded with the lineage the engine's status reports, every value copied from the
 * engine's output.
 */
import { existsSync, mkdirSync } from 'node:fs';
import type { Db } from '../../shared/db/client.ts';
import { newSnapshotId, putSnapshot, type Snapshot, type SnapshotBackup, type SnapshotLineage } from '../../shared/db/snapshots.ts';
import { ServiceError } from '../../shared/errors.ts';
import { ENGINE_PIN } from '../../shared/schemas/projects.ts';
import { nowIso } from '../../shared/time.ts';
import { backupCommand, statusCommand, type ResultOf } from '../engine-commands.ts';
import type { Engines } from './engine.ts';
import type { Layout } from './layout.ts';
import type { TenantLogs } from './logs.ts';
import type { EnginePin } from './pin.ts';

/** What a snapshot needs. */
export interface SnapshotDeps {
  db: Db;
  layout: Layout;
  logs: TenantLogs;
  now: () => number;
  pin: EnginePin;
  engines: Pick<Engines, 'get' | 'run' | 'startTimeoutMs' | 'longTimeoutMs' | 'privateDir' | 'prepare'>;
}

/** How a snapshot is taken besides its label. */
export interface SnapshotOptions {
  /** Taken by the agent after a sleep (./auto-backup.ts). */
  automatic?: boolean;
  /** The engine's status, already read in this turn (the tenant asleep since): not read again. */
  status?: ResultOf<typeof statusCommand>;
}

/**
 * Backs up the sleeping tenant's data directory and records the snapshot (the caller holds the
 * project's queue). `claim` is told the new id before its backup begins (./holds.ts).
 */
export async function takeSnapshot(deps: SnapshotDeps, projectId: string, label: string | null, claim: (snapshotId: string) => void = () => {}, options: SnapshotOptions = {}): Promise<Snapshot> {
  const { layout, engines } = deps;
  if (engines.get(projectId)) throw new ServiceError('tenant_running', 'the tenant is running: sleep it before taking a snapshot');
  const dataDir = layout.dataDir(projectId);
  if (!existsSync(dataDir)) throw new ServiceError('tenant_not_running', 'the tenant has never started: it has no data directory to snapshot');
  await deps.pin.ensure();
  const createdAt = deps.now();
  const snapshotId = newSnapshotId(createdAt);
  claim(snapshotId);
  const backupDir = layout.backupDir(projectId, snapshotId);
  mkdirSync(layout.snapshotRoot(projectId), { recursive: true });
  const status = options.status ?? (await engines.run(projectId, statusCommand, { dataDir }, 'snapshot', engines.startTimeoutMs));
  const backup = await engines.run(projectId, backupCommand, { dataDir, out: backupDir }, 'snapshot', engines.longTimeoutMs);
  const snapshot: Snapshot = {
    id: snapshotId,
    project: projectId,
    label,
    created_at: nowIso(createdAt),
    engine_version: deps.pin.engineVersion() ?? ENGINE_PIN,
    source_data_dir: dataDir,
    backup_dir: backupDir,
    lineage: pickLineage(status),
    backup: pickBackup(backup),
    // Shipped off the machine once recorded (host-agent/backups/backups.ts; docs/lifecycle.md "Off-machine copies").
    offsite: { state: 'pending', completed_at: null },
    automatic: options.automatic === true,
  };
  await putSnapshot(deps.db, snapshot);
  deps.logs.append(projectId, `snapshot ${snapshotId} created in ${backupDir}`);
  return snapshot;
}

/** The contract's `lineage` object, every value copied from the engine's status output. */
export function pickLineage(status: ResultOf<typeof statusCommand>): SnapshotLineage {
  const { catalog_version, directory_lineage, logical_time_micros, root_digest, visible_csn } = status;
  return { catalog_version, directory_lineage, logical_time_micros, root_digest, visible_csn };
}

/** The contract's `backup` object, every value copied from the engine's backup output. */
export function pickBackup(backup: ResultOf<typeof backupCommand>): SnapshotBackup {
  const { backup_path, checkpoint_digest, file_count, total_bytes, status, visible_csn } = backup;
  return { backup_path, checkpoint_digest, file_count, total_bytes, status, visible_csn };
}
