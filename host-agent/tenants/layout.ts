/**
 * The directory layout on an engine machine (docs/lifecycle.md "Directory layout"), in one place:
 *
 *   tenants/<project>/data/                    the one active data directory
 *   tenants/<project>/initializing-<ts>-<hex>/ `engine init` at work, renamed to data/ once it succeeded
 *   tenants/<project>/replaced/<ts>-<snap>/    previous directories moved aside by restore, freed only on request
 *   tenants/<project>/discarding/<name>/       a previous directory being freed, and its receipt marker
 *   tenants/<project>/restoring-<ts>-<snap>/   a restore's fresh directory, until it is swapped in
 *   tenants/<project>/unapplied/<ts>-<snap>/   a fresh directory of a restore interrupted before its swap
 *   tenants/<project>/restore.json             the journal of a restore in progress (crash repair)
 *   snapshots/<project>/<snapshot_id>/         backup directories (the snapshot root)
 *   run/<project>.json                         pid, port, started_at of a running engine
 *   logs/<project>/engine.log[.1-3]            the tenant's engine output, rotated by size
 *   cache/node-compile/                        Node's compile cache shared by engine processes
 */
import { join } from 'node:path';

/** Name prefix of a first start's directory while `engine init` builds it (then renamed to data/). */
export const INIT_STAGING_PREFIX = 'initializing-';
/** Name prefix of a restore's fresh directory until it is swapped in. */
export const RESTORE_STAGING_PREFIX = 'restoring-';

/** Every path the supervisor uses, derived from `SVCD_ROOT`. */
export interface Layout {
  root: string;
  tenants: string;
  snapshots: string;
  run: string;
  logs: string;
  compileCache: string;
  tenantDir(projectId: string): string;
  dataDir(projectId: string): string;
  replacedRoot(projectId: string): string;
  unappliedRoot(projectId: string): string;
  discardingRoot(projectId: string): string;
  restoreJournal(projectId: string): string;
  snapshotRoot(projectId: string): string;
  backupDir(projectId: string, snapshotId: string): string;
  runRecord(projectId: string): string;
  logDir(projectId: string): string;
  logFile(projectId: string): string;
}

/** The layout under `root`. Project and snapshot ids are validated before they reach a path. */
export function layoutOf(root: string): Layout {
  const tenants = join(root, 'tenants');
  const snapshots = join(root, 'snapshots');
  const run = join(root, 'run');
  const logs = join(root, 'logs');
  return {
    root,
    tenants,
    snapshots,
    run,
    logs,
    compileCache: join(root, 'cache', 'node-compile'),
    tenantDir: (p) => join(tenants, p),
    dataDir: (p) => join(tenants, p, 'data'),
    replacedRoot: (p) => join(tenants, p, 'replaced'),
    unappliedRoot: (p) => join(tenants, p, 'unapplied'),
    discardingRoot: (p) => join(tenants, p, 'discarding'),
    restoreJournal: (p) => join(tenants, p, 'restore.json'),
    snapshotRoot: (p) => join(snapshots, p),
    backupDir: (p, s) => join(snapshots, p, s),
    runRecord: (p) => join(run, `${p}.json`),
    logDir: (p) => join(logs, p),
    logFile: (p) => join(logs, p, 'engine.log'),
  };
}

/** A compact UTC timestamp for directory names: `20261122T003243123Z`. */
export function dirStamp(now: number): string {
  return new Date(now).toISOString().replace(/[-:.]/g, '');
}
