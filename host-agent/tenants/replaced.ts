/**
 * Previous data directories (docs/lifecycle.md "Previous data directories"): what restore moved aside
 * under `tenants/<p>/replaced/`, listed with the time it was moved, the snapshot that replaced it and
 * its size, and freed one at a time on the owner's request (the service itself never deletes one).
 *
 * Freeing is crash-safe and receipted: a marker holding the receipt is written first
 * (`discarding/<name>.receipt.json`), then one rename moves the directory to `discarding/<name>`
 * (the commit point: from then on it is no longer listed), then the receipt is written to DynamoDB,
 * the marker removed and the directory deleted. The agent's start finishes what a crash interrupted
 * (`repairDiscards`: before the rename the marker is dropped, after it the receipt is written) and
 * the start's sweep removes what is left under `discarding/` (./leftovers.ts).
 */
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { lstat, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Db } from '../../shared/db/client.ts';
import { newReceipt, putReceipt, type Receipt } from '../../shared/db/receipts.ts';
import { errors } from '../../shared/errors.ts';
import { ID_PATTERNS } from '../../shared/ids.ts';
import type { ReplacedDir, ReplacedPage } from '../../shared/schemas/lifecycle.ts';
import { replacedNameSchema } from '../../shared/schemas/snapshots.ts';
import { nowIso } from '../../shared/time.ts';
import { readJsonRecord, removeRecord, renameDurable, writeJsonDurable } from './files.ts';
import type { Layout } from './layout.ts';
import type { TenantLogs } from './logs.ts';

/** Who asked for a deletion, for its receipt (docs/api.md "Receipts"). */
export interface Deletion {
  actor: string;
  requestId: string;
}

/** What freeing a previous directory needs. */
export interface ReplacedDeps {
  db: Db;
  layout: Layout;
  logs: TenantLogs;
  now: () => number;
  log: (line: string) => void;
}

/** Suffix of the marker that holds the receipt of a directory being freed. */
export const DISCARD_MARKER_SUFFIX = '.receipt.json';

/** The name restore gives a previous directory: `<UTC stamp of the move>-<snapshot_id>` (./restore.ts). */
const STAMPED_NAME = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(\d{3})Z-(snap_[0-9a-f]{16})$/;

/** The time and snapshot a restore-made name carries, or null for any other name. */
export function parseReplacedName(name: string): { movedAt: string; snapshotId: string } | null {
  const m = STAMPED_NAME.exec(name);
  if (!m) return null;
  const movedAt = new Date(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.${m[7]}Z`);
  if (Number.isNaN(movedAt.getTime()) || !ID_PATTERNS.snap.test(m[8]!)) return null;
  return { movedAt: movedAt.toISOString(), snapshotId: m[8]! };
}

/** Whether `name` may name a previous directory at all (shared/schemas/snapshots.ts `replacedNameSchema`). */
function acceptableName(name: string): boolean {
  return replacedNameSchema.safeParse(name).success;
}

/** Bytes of the regular files under `path` (symbolic links are not followed), as `du -sb` counts file sizes. */
export async function treeBytes(path: string): Promise<number> {
  let total = 0;
  const pending = [path];
  while (pending.length > 0) {
    const dir = pending.pop()!;
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    for (const name of names) {
      const child = join(dir, name);
      let stat;
      try {
        stat = await lstat(child);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw err;
      }
      if (stat.isDirectory()) pending.push(child);
      else if (stat.isFile()) total += stat.size;
    }
  }
  return total;
}

/**
 * The entry of previous directory `name`, or null when there is none by that name (a file or a
 * symbolic link there is not one). A name restore did not make says nothing of its snapshot
 * (`snapshot_id` null) and its time is the directory's change time, which its move aside set.
 */
export async function replacedEntry(layout: Layout, projectId: string, name: string): Promise<ReplacedDir | null> {
  if (!acceptableName(name)) return null;
  const path = join(layout.replacedRoot(projectId), name);
  let stat;
  try {
    stat = await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  if (!stat.isDirectory()) return null;
  const parsed = parseReplacedName(name);
  return {
    name,
    path,
    moved_at: parsed?.movedAt ?? new Date(stat.ctimeMs).toISOString(),
    snapshot_id: parsed?.snapshotId ?? null,
    bytes: await treeBytes(path),
  };
}

/**
 * One page of the project's previous directories, by name descending (restore's names begin with
 * their UTC time, so newest first), starting after `after`. Sizes are measured for the page only.
 */
export async function listReplaced(layout: Layout, projectId: string, limit: number, after?: string): Promise<ReplacedPage> {
  let names: string[];
  try {
    names = await readdir(layout.replacedRoot(projectId));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { items: [], next: null };
    throw err;
  }
  const ordered = names.filter((n) => acceptableName(n) && (after === undefined || n < after)).sort((a, b) => (a < b ? 1 : a > b ? -1 : 0));
  const items: ReplacedDir[] = [];
  let i = 0;
  for (; i < ordered.length && items.length < limit; i++) {
    const entry = await replacedEntry(layout, projectId, ordered[i]!);
    if (entry) items.push(entry);
  }
  // A next page exists only when a directory remains past this one: a full last page leads nowhere.
  let more = false;
  for (; i < ordered.length && !more; i++) more = await isDirectory(join(layout.replacedRoot(projectId), ordered[i]!));
  return { items, next: more ? items[items.length - 1]!.name : null };
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await lstat(path)).isDirectory();
  } catch {
    return false;
  }
}

function markerOf(layout: Layout, projectId: string, name: string): string {
  return join(layout.discardingRoot(projectId), `${name}${DISCARD_MARKER_SUFFIX}`);
}

/**
 * Frees previous directory `name` of the project and writes its `replaced.delete` receipt; answers
 * the entry as it was (its `bytes` are what was freed). Unknown name: 404. The caller holds the
 * project's queue, so no restore moves a directory meanwhile.
 */
export async function discardReplaced(deps: ReplacedDeps, projectId: string, name: string, deletion: Deletion): Promise<ReplacedDir> {
  const { layout, db } = deps;
  const entry = await replacedEntry(layout, projectId, name);
  if (!entry) throw errors.notFound(`previous directory ${name} not found`);
  const receipt = newReceipt({ project: projectId, op: 'replaced.delete', target: name, actor: deletion.actor, request_id: deletion.requestId, at: nowIso(deps.now()) });
  const marker = markerOf(layout, projectId, name);
  const discarding = join(layout.discardingRoot(projectId), name);
  mkdirSync(layout.discardingRoot(projectId), { recursive: true });
  writeJsonDurable(marker, receipt);
  try {
    renameDurable(entry.path, discarding);
  } catch (err) {
    removeRecord(marker);
    throw err;
  }
  try {
    await putReceipt(db, receipt);
  } catch (err) {
    // No receipt, no deletion: put the directory back. Should that fail too, the marker stays and
    // the next start writes the receipt (the directory is then gone from the list for good).
    try {
      renameDurable(discarding, entry.path);
      removeRecord(marker);
    } catch (undo) {
      deps.log(`agent: putting back ${projectId} previous directory ${name} failed: ${(undo as Error).message}; the next start completes its removal`);
    }
    throw err;
  }
  removeRecord(marker);
  deps.logs.append(projectId, `previous data directory ${name} freed (${entry.bytes} bytes) on request ${deletion.requestId}`);
  try {
    await rm(discarding, { recursive: true, force: true });
  } catch (err) {
    deps.log(`agent: removing ${discarding} failed: ${(err as Error).message}; swept at the next start`);
  }
  return entry;
}

/** A receipt read back from a marker, or null when the marker is not one of this project's. */
function markerReceipt(record: Record<string, unknown> | null, projectId: string, name: string): Receipt | null {
  if (!record) return null;
  const { id, project, op, target, actor, request_id, at } = record;
  const strings = [id, project, op, target, actor, request_id, at].every((v) => typeof v === 'string');
  if (!strings || project !== projectId || op !== 'replaced.delete' || target !== name || !ID_PATTERNS.rcpt.test(id as string)) return null;
  return record as unknown as Receipt;
}

/**
 * At agent start, before the sweeps: finishes the frees a crash interrupted. A marker whose
 * directory is still under `replaced/` was never committed and is dropped; one whose directory left
 * has its receipt written (again, idempotently) and is dropped. A receipt that cannot be written
 * keeps its marker for the next start. Directories under `discarding/` are the sweep's.
 */
export async function repairDiscards(deps: Pick<ReplacedDeps, 'db' | 'layout' | 'logs'>, projectId: string): Promise<void> {
  const { layout, db, logs } = deps;
  const root = layout.discardingRoot(projectId);
  if (!existsSync(root)) return;
  for (const file of readdirSync(root, { withFileTypes: true })) {
    if (!file.isFile() || !file.name.endsWith(DISCARD_MARKER_SUFFIX)) continue;
    const name = file.name.slice(0, -DISCARD_MARKER_SUFFIX.length);
    const marker = join(root, file.name);
    const receipt = markerReceipt(readJsonRecord(marker), projectId, name);
    if (receipt && acceptableName(name) && !existsSync(join(layout.replacedRoot(projectId), name))) {
      await putReceipt(db, receipt);
      logs.append(projectId, `interrupted free of previous data directory ${name} completed at start`);
    }
    removeRecord(marker);
  }
}
