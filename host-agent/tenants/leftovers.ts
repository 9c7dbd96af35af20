/**
 * What crashed operations leave in the tenants' directories, swept at agent start (docs/lifecycle.md
 * "Leftovers"). Only things that never held a tenant's served data are removed:
 *
 * - temp files of durable writes (`<record>.tmp-<pid>[-<hex>]` in `run/` and `tenants/<p>/`, the
 *   agent id's `agent-id.tmp`);
 * - staging directories: a first start's `initializing-…` (./init.ts), a restore's `restoring-…` once
 *   no journal names it, `unapplied/` (restores undone at start), and the engine's own
 *   `<name>.staging-<hex>` siblings, which the engine contract calls safe to delete (docs/engine.md);
 * - previous directories the owner freed whose removal a crash interrupted (`discarding/`, left
 *   after ./replaced.ts `repairDiscards` dealt with their receipt markers);
 * - backup directories under `snapshots/<p>/` that no snapshot row records (a crash between the
 *   backup and the row), only of snapshots begun before this agent started.
 *
 * `data/`, `replaced/`, recorded backups and anything unknown are never touched.
 */
import { existsSync, lstatSync, readdirSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { listSnapshots } from '../../shared/db/snapshots.ts';
import { getProject } from '../../shared/db/projects.ts';
import type { Db } from '../../shared/db/client.ts';
import { ID_PATTERNS } from '../../shared/ids.ts';
import { INIT_STAGING_PREFIX, RESTORE_STAGING_PREFIX, type Layout } from './layout.ts';
import { DISCARD_MARKER_SUFFIX } from './replaced.ts';

/** What one sweep removed (paths relative to the agent root, or ids) and what it failed to remove. */
export interface Sweep {
  removed: string[];
  failed: string[];
}

const TEMP_FILE = /\.tmp-\d+(?:-[0-9a-z]+)?$/;
const ENGINE_STAGING = /\.staging-[0-9a-f]+$/;

function entries(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function remove(layout: Layout, path: string, sweep: Sweep): void {
  try {
    rmSync(path, { recursive: true, force: true });
    sweep.removed.push(relative(layout.root, path));
  } catch (err) {
    sweep.failed.push(`${relative(layout.root, path)} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** A receipt marker of a freed previous directory (./replaced.ts): a file, not a directory of that name. */
function isMarker(path: string): boolean {
  try {
    return path.endsWith(DISCARD_MARKER_SUFFIX) && lstatSync(path).isFile();
  } catch {
    return false;
  }
}

/** Temp files of durable writes. Run before any listener opens: no write of this agent is in flight. */
export function sweepTempFiles(layout: Layout): Sweep {
  const sweep: Sweep = { removed: [], failed: [] };
  if (existsSync(join(layout.root, 'agent-id.tmp'))) remove(layout, join(layout.root, 'agent-id.tmp'), sweep);
  for (const name of entries(layout.run)) if (TEMP_FILE.test(name)) remove(layout, join(layout.run, name), sweep);
  for (const projectId of entries(layout.tenants).filter((n) => ID_PATTERNS.prj.test(n))) {
    for (const name of entries(layout.tenantDir(projectId))) if (TEMP_FILE.test(name)) remove(layout, join(layout.tenantDir(projectId), name), sweep);
  }
  return sweep;
}

/**
 * Staging directories of first starts, restores and the engine. Run after interrupted restores were
 * repaired (a journal still present means its repair failed: that tenant's restore staging is left
 * for the next start) and before any listener opens.
 */
export function sweepStaging(layout: Layout): Sweep {
  const sweep: Sweep = { removed: [], failed: [] };
  for (const projectId of entries(layout.tenants).filter((n) => ID_PATTERNS.prj.test(n))) {
    const tenantDir = layout.tenantDir(projectId);
    const journal = existsSync(layout.restoreJournal(projectId));
    for (const name of entries(tenantDir)) {
      const restoreStaging = name.startsWith(RESTORE_STAGING_PREFIX) || name === 'unapplied';
      if (restoreStaging && journal) continue;
      if (name === 'unapplied') {
        const root = layout.unappliedRoot(projectId);
        for (const undone of entries(root)) remove(layout, join(root, undone), sweep);
        if (entries(root).length === 0) rmSync(root, { recursive: true, force: true });
      } else if (name === 'discarding') {
        // A receipt marker still there could not be written at start: kept for the next one.
        const root = layout.discardingRoot(projectId);
        for (const freed of entries(root)) if (!isMarker(join(root, freed))) remove(layout, join(root, freed), sweep);
        if (entries(root).length === 0) rmSync(root, { recursive: true, force: true });
      } else if (name.startsWith(INIT_STAGING_PREFIX) || name.startsWith(RESTORE_STAGING_PREFIX) || ENGINE_STAGING.test(name)) {
        remove(layout, join(tenantDir, name), sweep);
      }
    }
  }
  for (const projectId of entries(layout.snapshots).filter((n) => ID_PATTERNS.prj.test(n))) {
    const root = layout.snapshotRoot(projectId);
    for (const name of entries(root)) if (ENGINE_STAGING.test(name)) remove(layout, join(root, name), sweep);
  }
  return sweep;
}

/** The creation time a snapshot id carries (shared/db/snapshots.ts `newSnapshotId`). */
function snapshotTime(snapshotId: string): number {
  return Number.parseInt(snapshotId.slice('snap_'.length, 'snap_'.length + 12), 16);
}

/**
 * Backup directories no snapshot row records, of projects this agent hosts. Only snapshots begun
 * before `before` (this agent's start) are candidates, so a snapshot this agent is taking, whose row
 * is written after its backup, is never one; a row read that fails leaves the project's backups alone.
 */
export async function sweepUnrecordedBackups(layout: Layout, db: Db, agentId: string, before: number): Promise<Sweep> {
  const sweep: Sweep = { removed: [], failed: [] };
  for (const projectId of entries(layout.snapshots).filter((n) => ID_PATTERNS.prj.test(n))) {
    const candidates = entries(layout.snapshotRoot(projectId)).filter((n) => ID_PATTERNS.snap.test(n) && snapshotTime(n) < before);
    if (candidates.length === 0) continue;
    let recorded: Set<string>;
    try {
      const project = await getProject(db, projectId);
      if (!project || project.agent_id !== agentId) continue;
      recorded = new Set<string>();
      let cursor: string | undefined;
      do {
        const page = await listSnapshots(db, projectId, 1000, cursor);
        for (const snapshot of page.items) recorded.add(snapshot.id);
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
    } catch (err) {
      sweep.failed.push(`${projectId} (its snapshot rows could not be read: ${(err as Error).message})`);
      continue;
    }
    for (const snapshotId of candidates) if (!recorded.has(snapshotId)) remove(layout, layout.backupDir(projectId, snapshotId), sweep);
  }
  return sweep;
}
