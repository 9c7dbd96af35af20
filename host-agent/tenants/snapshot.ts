/**
 * Snapshots (docs/lifecycle.md "Snapshot record"): a verified backup of the sleeping tenant's data
 * directory, recorded with the lineage the engine's status reports, every value copied from the
 * engine's output.
 */
import { existsSync, mkdirSync } from 'node:fs';
import type { Db } from '../../shared/db/client.ts';
import { newSnapshotId, putSnapshot, type Snapshot, type SnapshotBackup, type SnapshotLineage } from '../../shared/db/snapshots.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import { ENGINE_PIN } from '../../shared/schemas/projects.ts';
import { nowIso } from '../../shared/time.ts';
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
  engines: Pick<Engines, 'get' | 'command' | 'startTimeoutMs' | 'longTimeoutMs' | 'privateDir' | 'prepare'>;
}

/**
 * Backs up the sleeping tenant's data directory and records the snapshot (the caller holds the
 * project's queue). `claim` is told the new id before its backup begins (./holds.ts).
 */
export async function takeSnapshot(deps: SnapshotDeps, projectId: string, label: string | null, claim: (snapshotId: string) => void = () => {}): Promise<Snapshot> {
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
  const status = await engines.command(projectId, ['status', '--data-dir', dataDir, '--json'], 'snapshot', engines.startTimeoutMs);
  const backup = await engines.command(projectId, ['backup', '--data-dir', dataDir, '--out', backupDir, '--json'], 'snapshot', engines.longTimeoutMs);
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
  };
  await putSnapshot(deps.db, snapshot);
  deps.logs.append(projectId, `snapshot ${snapshotId} created in ${backupDir}`);
  return snapshot;
}

function requireField<T>(output: Record<string, unknown>, name: string, check: (v: unknown) => v is T, what: string): T {
  const value = output[name];
  if (!check(value)) throw errors.upstream(`the engine's ${what} output lacks a valid ${name}`);
  return value;
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);
const isStr = (v: unknown): v is string => typeof v === 'string';

/** The contract's `lineage` object, every value copied from the engine's status output. */
export function pickLineage(status: Record<string, unknown>): SnapshotLineage {
  return {
    catalog_version: requireField(status, 'catalog_version', isInt, 'status'),
    directory_lineage: requireField(status, 'directory_lineage', isStr, 'status'),
    logical_time_micros: requireField(status, 'logical_time_micros', isInt, 'status'),
    root_digest: requireField(status, 'root_digest', isStr, 'status'),
    visible_csn: requireField(status, 'visible_csn', isInt, 'status'),
  };
}

/** The contract's `backup` object, every value copied from the engine's backup output. */
export function pickBackup(backup: Record<string, unknown>): SnapshotBackup {
  return {
    backup_path: requireField(backup, 'backup_path', isStr, 'backup'),
    checkpoint_digest: requireField(backup, 'checkpoint_digest', isStr, 'backup'),
    file_count: requireField(backup, 'file_count', isInt, 'backup'),
    total_bytes: requireField(backup, 'total_bytes', isInt, 'backup'),
    status: requireField(backup, 'status', (v): v is 'created' | 'verified' => v === 'created' || v === 'verified', 'backup'),
    visible_csn: requireField(backup, 'visible_csn', isInt, 'backup'),
  };
}
