/**
 * Deleting a project on the agent that hosts it (docs/lifecycle.md "Deleting a project"). The
 * supervisor (./tenants.ts `deleteProject`) stops the engine under the project's queue, then:
 *
 * 1. `markDeleting`: the commit point, one DynamoDB transaction (shared/db/project-delete.ts). Before
 *    it the project is whole; after it every read of it is 404 and the deletion is recorded
 *    `deleting` under this agent, which finishes it, now or at its next start.
 * 2. `finishDeletion`, each step idempotent so a crash anywhere is finished by running it again:
 *    the project's `s3` blobs (every object under its prefix), its directories on this machine
 *    (`projectPaths`), every item of its partition but the receipts, then the record `deleted`.
 *
 * Each step logs one line on the agent's log (`agent: deleting <project>: …`): ids and counts only.
 */
import { existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { deleteProjectS3Blobs } from '../../shared/blobs/s3-purge.ts';
import type { Settings } from '../../shared/config.ts';
import type { Log } from '../../shared/log.ts';
import type { Db } from '../../shared/db/client.ts';
import {
  markProjectDeleted,
  markProjectDeleting,
  purgeProjectItems,
  usesS3,
  type ProjectDeletion,
} from '../../shared/db/project-delete.ts';
import type { ProjectRecord } from '../../shared/db/projects.ts';
import { newReceipt } from '../../shared/db/receipts.ts';
import { errors } from '../../shared/errors.ts';
import type { ProjectState } from '../../shared/schemas/projects.ts';
import { nowIso } from '../../shared/time.ts';
import { removeProjectBackups, type BackupSettings } from '../backups/store.ts';
import { removeRecord } from './files.ts';
import type { Layout } from './layout.ts';

/** What a deletion needs. */
export interface DeletionDeps {
  db: Db;
  settings: Pick<Settings, 'SVCD_DELETED_RECEIPTS_RETENTION_DAYS' | 'SVCD_BLOB_BACKEND'> &
    Parameters<typeof deleteProjectS3Blobs>[0] &
    BackupSettings;
  layout: Layout;
  now: () => number;
  log: Log;
}

/** Who asked for a deletion, for its receipt (docs/api.md "Receipts"). */
export interface DeletionRequest {
  actor: string;
  requestId: string;
  /**
   * Aborted when the caller has gone (its connection closed): checked just before the commit point,
   * so a caller that can no longer hear the answer leaves the project whole (docs/lifecycle.md).
   */
  signal?: AbortSignal;
}

const DAY_MS = 24 * 3600 * 1000;

/**
 * The commit point: `project` (as recorded, hosted here) becomes a deletion record `deleting`, with
 * its `project.delete` receipt and `state`, the one the deletion answers. 404 when it is no longer
 * there; 503 with nothing written when the caller has gone already.
 */
export async function markDeleting(deps: DeletionDeps, project: ProjectRecord, request: DeletionRequest, state: ProjectState): Promise<ProjectDeletion> {
  if (request.signal?.aborted) throw errors.orchestrator(`the deletion of project ${project.id} was not committed: its caller has gone`);
  const now = deps.now();
  const at = nowIso(now);
  const receipt = newReceipt({ project: project.id, op: 'project.delete', target: project.id, actor: request.actor, request_id: request.requestId, at });
  const deletion = await markProjectDeleting(deps.db, {
    project,
    at,
    expiresAt: nowIso(now + deps.settings.SVCD_DELETED_RECEIPTS_RETENTION_DAYS * DAY_MS),
    receipt,
    state,
  });
  deps.log(`agent: deleting ${project.id}: marked deleting`, { level: 'info', event: 'project.delete', project_id: project.id, request_id: request.requestId, step: 'marked' });
  return deletion;
}

/**
 * Every path on this machine that holds something of the project: `<area>/<project>` under
 * `SVCD_ROOT` for every area (tenants/ with data/ and replaced/, snapshots/, logs/, the `fs` blobs
 * under blobs/, and any area added later that follows the same convention), and its pid record.
 */
export function projectPaths(layout: Layout, projectId: string): string[] {
  const paths: string[] = [];
  let areas: string[];
  try {
    areas = readdirSync(layout.root);
  } catch {
    areas = [];
  }
  for (const area of areas) {
    const path = join(layout.root, area, projectId);
    try {
      if (statSync(join(layout.root, area)).isDirectory() && existsSync(path)) paths.push(path);
    } catch {
      // Gone meanwhile.
    }
  }
  if (existsSync(layout.runRecord(projectId))) paths.push(layout.runRecord(projectId));
  return paths;
}

/**
 * Removes what remains of a project marked deleting, then records it `deleted`. Idempotent: run
 * again after a crash at any step, it finishes the work. The engine must be stopped already.
 */
export async function finishDeletion(deps: DeletionDeps, deletion: ProjectDeletion): Promise<void> {
  const { db, layout, log, settings } = deps;
  const projectId = deletion.id;

  // Bytes first: once their rows are gone nothing would say that S3 holds any.
  if (settings.SVCD_BLOB_BACKEND === 's3' || (await usesS3(db, projectId))) {
    const blobs = await deleteProjectS3Blobs(settings, projectId);
    log(`agent: deleting ${projectId}: ${blobs} s3 blobs removed`, { level: 'info', event: 'project.delete', project_id: projectId, step: 's3', count: blobs });
  }

  // Its off-machine copies (docs/lifecycle.md "Off-machine copies"), before its snapshot rows go.
  const copies = await removeProjectBackups(settings, projectId, log);
  if (copies > 0) log(`agent: deleting ${projectId}: ${copies} off-machine copies removed`, { level: 'info', event: 'project.delete', project_id: projectId, step: 'backups', count: copies });

  const paths = projectPaths(layout, projectId);
  for (const path of paths) {
    if (path === layout.runRecord(projectId)) removeRecord(path);
    else rmSync(path, { recursive: true, force: true });
  }
  const removed = paths.map((p) => p.slice(layout.root.length + 1));
  log(`agent: deleting ${projectId}: directories removed: ${removed.join(', ') || '(none)'}`, { level: 'info', event: 'project.delete', project_id: projectId, step: 'directories', paths: removed });

  const items = await purgeProjectItems(db, deletion);
  log(`agent: deleting ${projectId}: ${items} items removed`, { level: 'info', event: 'project.delete', project_id: projectId, step: 'items', count: items });

  await markProjectDeleted(db, deletion, nowIso(deps.now()));
  log(`agent: deleting ${projectId}: deleted`, { level: 'info', event: 'project.delete', project_id: projectId, step: 'deleted' });
}

/**
 * Runs `finish` until it succeeds: at once, then after a growing pause (up to 5 minutes) while
 * `closed()` is false. The agent's start runs it again for whatever is still unfinished then.
 */
export function finishInBackground(finish: () => Promise<void>, log: Log, what: string, closed: () => boolean, firstDelayMs = 0): void {
  let delay = Math.max(firstDelayMs, 0);
  const attempt = () => {
    if (closed()) return;
    finish().catch((err: unknown) => {
      delay = Math.min(Math.max(delay * 2, 1000), 5 * 60_000);
      log(`agent: ${what} failed: ${(err as Error).message}; retried in ${Math.round(delay / 1000)} s`, { level: 'warn', event: 'project.delete', err });
      setTimeout(attempt, delay).unref();
    });
  };
  if (delay === 0) attempt();
  else setTimeout(attempt, delay).unref();
}
