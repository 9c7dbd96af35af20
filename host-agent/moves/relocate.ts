/**
 * Relocation, on the project's agent (docs/durability.md "Relocation"): a sleeping project moves to
 * another live agent through its newest verified snapshot (taken first when the data changed since),
 * shipped off the machine; the receiving agent restores it and copies the `fs` blobs (./receive.ts);
 * then one transaction points the project at it (shared/db/moves.ts). Only after that commit does
 * this agent drop its copy. A crash before the commit leaves the project here, whole; after it, the
 * project is the other agent's and this agent's copy goes at its next start (./stale.ts).
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { listAgents, agentIsLive, choosePlacement, getAgent, type AgentRecord } from '../../shared/db/agents.ts';
import { getProject } from '../../shared/db/projects.ts';
import { latestSnapshotId } from '../../shared/db/snapshots.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import { internalPaths } from '../../shared/internal-paths.ts';
import type { RelocateOrder, Relocated } from '../../shared/schemas/moves.ts';
import { nowIso } from '../../shared/time.ts';
import type { AgentContext } from '../context.ts';
import type { TenantParts } from '../tenants/parts.ts';
import { takeSnapshot } from '../tenants/snapshot.ts';
import { agentCalls } from './calls.ts';
import { handOver } from './hand-over.ts';
import { discardCopy } from './receive.ts';

/** Options of one relocation besides the order. */
export interface RelocateOptions {
  /** Sleep a running tenant first and wake it on the new agent (a drain); without it a running tenant is 409. */
  moveRunning?: boolean;
}

/** Moves the project to another live agent (the order's, or the least loaded). */
export async function relocateProject(ctx: AgentContext, projectId: string, order: RelocateOrder, options: RelocateOptions = {}): Promise<Relocated> {
  const project = await getProject(ctx.db, projectId);
  if (!project) throw errors.notFound(`project ${projectId} not found`);
  if (project.agent_id !== ctx.agentId) throw errors.conflict(`project ${projectId} is not hosted by this agent`);
  const target = await chooseTarget(ctx, order.target_agent ?? null);
  const moved = await ctx.tenants.exclusive(projectId, async (parts) => {
    const wasRunning = await sleepFirst(parts, projectId, options.moveRunning === true);
    const hasData = existsSync(parts.layout.dataDir(projectId));
    const snapshotId = hasData ? await shippedSnapshot(ctx, parts, projectId) : null;
    const state: Relocated['state'] = hasData ? 'sleeping' : 'stopped';
    await handOver(ctx, {
      projectId,
      from: ctx.agentId,
      to: target,
      state,
      at: nowIso(ctx.now()),
      receive: { reason: 'relocate', snapshot_id: snapshotId, blobs_from: ctx.agentId },
      op: 'project.relocate',
      actor: order.actor,
      requestId: order.request_id,
    });
    // Committed: the project is the other agent's. Nothing of it is served here again.
    parts.queue.retire(projectId, () => errors.orchestrator(`project ${projectId} moved to another host agent: retry`));
    forgetHere(ctx, projectId);
    await announceMove(ctx, projectId);
    const removed = discardCopy(ctx, parts, projectId);
    ctx.log(`agent: relocated ${projectId} to ${target.agent_id} (snapshot ${snapshotId ?? 'none'}); removed here: ${removed.length} paths`, {
      level: 'info',
      event: 'project.relocate',
      project_id: projectId,
      to: target.agent_id,
    });
    return { relocated: { project: projectId, from: ctx.agentId, to: target.agent_id, snapshot_id: snapshotId, state }, wasRunning };
  });
  if (!moved.wasRunning) return moved.relocated;
  // A drained tenant that was running runs again on its new agent.
  const woken = await agentCalls(ctx).json<{ state: 'running' }>(target, 'POST', internalPaths.lifecycle(projectId, 'wakeup'), {
    body: { recorded: { state: moved.relocated.state, updated_at: nowIso(ctx.now()) } },
  });
  return { ...moved.relocated, state: woken.state };
}

/** The agent to move to: the one asked for (live, taking projects, not this one), or the least loaded other one. */
export async function chooseTarget(ctx: AgentContext, wanted: string | null): Promise<AgentRecord> {
  const staleMs = ctx.settings.SVCD_AGENT_STALE_MS;
  if (wanted !== null) {
    const agent = await getAgent(ctx.db, wanted);
    if (!agent) throw errors.invalid(`target_agent: agent ${wanted} is not registered`);
    if (agent.agent_id === ctx.agentId) throw errors.invalid('target_agent: the project is hosted by that agent already');
    if (!agentIsLive(agent, staleMs, ctx.now()) || agent.status !== undefined) throw errors.conflict(`agent ${wanted} is not live or takes no projects (${agent.status ?? 'stale'})`);
    return agent;
  }
  const others = (await listAgents(ctx.db)).filter((a) => a.agent_id !== ctx.agentId);
  const target = choosePlacement(others, staleMs, ctx.now());
  if (!target) throw errors.orchestrator('no other live host agent takes projects: nowhere to move to');
  return target;
}

/** Stops a running tenant when allowed (answers whether it ran); 409 `tenant_running` otherwise. */
async function sleepFirst(parts: TenantParts, projectId: string, allowed: boolean): Promise<boolean> {
  const live = parts.engines.get(projectId);
  if (!live) return false;
  if (!allowed) throw new ServiceError('tenant_running', 'the tenant is running: sleep it before relocating');
  await parts.engines.stop(live, 'relocation');
  const project = await getProject(parts.db, projectId);
  if (project) await parts.states.record(projectId, { state: project.state, updated_at: project.updated_at }, 'sleeping');
  return true;
}

/**
 * The snapshot the move goes through: the newest one when the data directory has not changed since
 * it was taken, else a new one; its off-machine copy complete (503 when there is no store).
 */
async function shippedSnapshot(ctx: AgentContext, parts: TenantParts, projectId: string): Promise<string> {
  const newestId = await latestSnapshotId(ctx.db, projectId);
  const current = newestId !== null && unchangedSince(parts.layout.dataDir(projectId), parts.layout.backupDir(projectId, newestId)) ? newestId : null;
  const snapshotId = current ?? (await takeSnapshot(parts, projectId, 'relocation')).id;
  const offsite = await ctx.backups.ship(projectId, snapshotId);
  if (offsite.state !== 'complete') {
    throw errors.orchestrator('this deployment keeps no off-machine copies (SVCD_BACKUP_DIR or the s3 backend): a project cannot move');
  }
  return snapshotId;
}

/**
 * Whether the sleeping tenant's database has not been written since the backup in `backupDir` was
 * made: none of its files (docs/engine.md "Directory layout": the database, its WAL, the meta file)
 * is newer than the backup's manifest, written last. Cheaper than the engine's `status`, which hashes
 * the database; any doubt (a file missing, a clock step) answers false, and a snapshot is taken.
 */
export function unchangedSince(dataDir: string, backupDir: string): boolean {
  try {
    const madeAt = statSync(join(backupDir, 'manifest.json')).mtimeMs;
    return ['data.sqlite', 'data.sqlite-wal', 'meta.json'].every((file) => {
      const path = join(dataDir, file);
      return !existsSync(path) ? file === 'data.sqlite-wal' : statSync(path).mtimeMs <= madeAt;
    });
  } catch {
    return false;
  }
}

/**
 * Tells every other live agent that the project moved, so their `/v2` listeners read its placement
 * again (best effort: a placement is also read again when it cannot serve, and expires).
 */
export async function announceMove(ctx: AgentContext, projectId: string): Promise<void> {
  const agents = (await listAgents(ctx.db).catch(() => [])).filter((a) => a.agent_id !== ctx.agentId && agentIsLive(a, ctx.settings.SVCD_AGENT_STALE_MS, ctx.now()));
  const calls = agentCalls(ctx);
  await Promise.all(agents.map((a) => calls.json(a, 'POST', internalPaths.placementChanged(projectId), { signal: AbortSignal.timeout(2000) }).catch(() => {})));
}

/** Forgets what this agent remembers of a project that left: placements, streams, function runtimes. */
export function forgetHere(ctx: AgentContext, projectId: string): void {
  ctx.keyCache.forgetPlacement(projectId);
  ctx.realtime.closeProject(projectId);
  ctx.functions.forgetProject(projectId, false);
}
