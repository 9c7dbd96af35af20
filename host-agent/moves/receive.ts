/**
 * The receiving side of a move (docs/durability.md "Relocation", "Agent loss", "Fork"): this agent
 * takes a project's copy in — its data directory restored from a verified snapshot, and its `fs`
 * blobs copied from the agent that has them — before anything in DynamoDB says the project is here.
 * The caller commits the move only once this answered; until then the copy is nobody's, marked by
 * `tenants/<p>/received.json`, and removed by the caller (`discardReceived`) or by the start sweep
 * of copies this agent does not host (./stale.ts).
 */
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as tar from 'tar';
import { getAgent } from '../../shared/db/agents.ts';
import { getProject } from '../../shared/db/projects.ts';
import { getSnapshot } from '../../shared/db/snapshots.ts';
import { errors } from '../../shared/errors.ts';
import { randomHex } from '../../shared/ids.ts';
import { internalPaths } from '../../shared/internal-paths.ts';
import type { ReceiveOrder, Received } from '../../shared/schemas/moves.ts';
import { nowIso } from '../../shared/time.ts';
import type { AgentContext } from '../context.ts';
import { projectPaths } from '../tenants/delete.ts';
import { writeJsonDurable } from '../tenants/files.ts';
import type { TenantParts } from '../tenants/parts.ts';
import { restoreBackup } from '../tenants/restore.ts';
import { agentCalls } from './calls.ts';

/** The marker of a copy taken in and not yet committed (./stale.ts keeps it for RECEIVED_GRACE_MS). */
export const RECEIVED_MARKER = 'received.json';

/**
 * Takes the project's copy in. Refused (409) when the project is already this agent's, or (fork)
 * when it exists at all: a copy never lands on top of data this agent serves.
 */
export async function receiveProject(ctx: AgentContext, projectId: string, order: ReceiveOrder): Promise<Received> {
  const project = await getProject(ctx.db, projectId);
  if (order.reason === 'fork' ? project !== null : project === null) throw errors.conflict(`project ${projectId} cannot be received for a ${order.reason}`);
  if (project?.agent_id === ctx.agentId) throw errors.conflict(`project ${projectId} is hosted here already`);
  return ctx.tenants.exclusive(
    projectId,
    async (parts) => {
    if (parts.engines.get(projectId)) throw errors.conflict(`project ${projectId} has an engine here`);
    // Again in the project's turn: a move that committed meanwhile made it this agent's.
    if ((await getProject(ctx.db, projectId))?.agent_id === ctx.agentId) throw errors.conflict(`project ${projectId} is hosted here already`);
    discardCopy(ctx, parts, projectId);
    mkdirSync(parts.layout.tenantDir(projectId), { recursive: true });
    writeJsonDurable(join(parts.layout.tenantDir(projectId), RECEIVED_MARKER), { reason: order.reason, received_at: nowIso(ctx.now()) });
    try {
      const rootDigest = order.snapshot_id === null ? null : await restoreInto(ctx, parts, projectId, order.snapshot_id, order.from_project ?? projectId);
      const blobs = order.blobs_from ? await copyBlobs(ctx, projectId, order.blobs_from) : 0;
      parts.logs.append(projectId, `received for a ${order.reason}: snapshot ${order.snapshot_id ?? '(none)'}, ${blobs} blob files`);
      return { root_digest: rootDigest, blobs };
    } catch (err) {
      discardCopy(ctx, parts, projectId);
      throw err;
    }
    },
    { reinstate: true },
  );
}

/** Drops a copy taken in whose move was not committed (the caller's clean-up); never one this agent hosts. */
export async function discardReceived(ctx: AgentContext, projectId: string): Promise<void> {
  const project = await getProject(ctx.db, projectId);
  if (project?.agent_id === ctx.agentId) throw errors.conflict(`project ${projectId} is hosted here`);
  await ctx.tenants.exclusive(projectId, async (parts) => {
    if (parts.engines.get(projectId)) throw errors.conflict(`project ${projectId} has an engine here`);
    discardCopy(ctx, parts, projectId);
  });
}

/** Removes everything of the project under `SVCD_ROOT` (an earlier copy, or one being dropped). */
export function discardCopy(ctx: AgentContext, parts: TenantParts, projectId: string): string[] {
  const removed = projectPaths(parts.layout, projectId);
  for (const path of removed) rmSync(path, { recursive: true, force: true });
  ctx.functions.forgetProject(projectId, false);
  return removed;
}

/**
 * The snapshot's backup brought here (a local copy when this agent holds the source project's,
 * else the off-machine copy) and restored as the data directory; answers the restored digest,
 * checked against the backup's (the engine verified the backup itself).
 */
async function restoreInto(ctx: AgentContext, parts: TenantParts, projectId: string, snapshotId: string, sourceProject: string): Promise<string> {
  const snapshot = await getSnapshot(ctx.db, sourceProject, snapshotId);
  if (!snapshot) throw errors.notFound(`snapshot ${snapshotId} not found`);
  // A fork on the source project's own agent restores straight from that project's backup (the
  // engine only reads it); anything else is fetched from the off-machine copy first.
  const local = parts.layout.backupDir(sourceProject, snapshotId);
  const fetched = sourceProject !== projectId && existsSync(local) ? null : parts.layout.backupDir(projectId, snapshotId);
  if (fetched !== null) {
    if (!ctx.backups.available) throw errors.orchestrator('this deployment keeps no off-machine copies (SVCD_BACKUP_DIR or the s3 backend): the snapshot cannot be brought here');
    mkdirSync(parts.layout.snapshotRoot(projectId), { recursive: true });
    await ctx.backups.fetchInto(sourceProject, snapshotId, fetched, { check: false });
  }
  const restored = await restoreBackup(parts, projectId, { snapshotId, backupDir: fetched ?? local, backup: snapshot.backup });
  // A fork keeps no snapshot of the source project: a copy fetched for it goes once restored.
  if (sourceProject !== projectId && fetched !== null) rmSync(fetched, { recursive: true, force: true });
  // The engine's restore re-checked the digests of what it wrote (docs/engine.md "restore"): its
  // answer must name the snapshot's own digest.
  const digest = restored.restoreOutput.checkpoint_digest;
  if (digest !== snapshot.backup.checkpoint_digest) throw errors.upstream(`the restored data directory of ${projectId} does not match snapshot ${snapshotId}`);
  return digest;
}

/** Whether a tar entry is a file or directory under `<projectId>/`. */
function ownEntry(projectId: string, path: string, entry: unknown): boolean {
  const type = (entry as { type?: string }).type;
  return (type === 'File' || type === 'Directory') && (path === projectId || path === `${projectId}/` || path.startsWith(`${projectId}/`));
}

/** Copies the project's `fs` blobs from `fromAgent` (a tar of its `blobs/<p>/`), renamed into place whole. */
async function copyBlobs(ctx: AgentContext, projectId: string, fromAgent: string): Promise<number> {
  const agent = await getAgent(ctx.db, fromAgent);
  if (!agent) throw errors.orchestrator(`agent ${fromAgent} is not registered`);
  const response = await agentCalls(ctx).fetch(agent, 'GET', internalPaths.blobsArchive(projectId));
  if (response.status === 204 || !response.body) return 0;
  const staging = join(ctx.blobs.root, `.incoming-${projectId}-${randomHex(4)}`);
  mkdirSync(staging, { recursive: true });
  let files = 0;
  try {
    await pipeline(
      Readable.fromWeb(response.body as import('node:stream/web').ReadableStream<Uint8Array>),
      // Only the project's own files and directories: no link, no path outside `<p>/` (tar refuses `..` and absolute names itself).
      tar.x({ cwd: staging, strict: true, filter: (path, entry) => ownEntry(projectId, path, entry) && (('type' in entry && entry.type !== 'File') || ++files > 0) }),
    );
    const into = join(ctx.blobs.root, projectId);
    rmSync(into, { recursive: true, force: true });
    if (existsSync(join(staging, projectId))) renameSync(join(staging, projectId), into);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return files;
}
