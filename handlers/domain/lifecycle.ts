/**
 * The tenant lifecycle (contract "States and transitions"; docs/lifecycle.md): wakeup, sleep, head,
 * snapshot and restore are done by the project's host agent, which records the state; the handlers
 * only pass it what they read. Snapshot reads come from DynamoDB. Deleting a snapshot and the
 * previous data directories restore keeps are the agent's too (docs/lifecycle.md "Deleting a
 * snapshot", "Previous data directories"): it holds the directories and writes the receipts.
 */
import { getSnapshot, listSnapshots, type Snapshot } from '../../shared/db/snapshots.ts';
import { getOwnedProject, projectView, type ProjectRecord } from '../../shared/db/projects.ts';
import { errors } from '../../shared/errors.ts';
import { internalPaths, type LifecycleOp } from '../../shared/internal-paths.ts';
import type { InternalDeletion, RecordedState, ReplacedDir, ReplacedPage, TenantStateAnswer } from '../../shared/schemas/lifecycle.ts';
import type { Project } from '../../shared/schemas/projects.ts';
import type { Deps } from '../context.ts';
import { pageOf, type AnsweredPage, type PageQuery } from './pages.ts';
import { agentFor, prefetchAgent, type AgentPrefetch } from './placement.ts';

/** An owned project about to be handed to its agent, with its agent record possibly being read already. */
export interface ProjectForAgent {
  project: ProjectRecord;
  prefetched?: AgentPrefetch | undefined;
}

/** A lifecycle call: the request it serves and the project it acts on. */
export interface LifecycleCall extends ProjectForAgent {
  requestId: string;
}

function recordedOf(project: ProjectRecord): RecordedState {
  return { state: project.state, updated_at: project.updated_at };
}

/**
 * The caller's project, 404 for any other, with the agent record of a remembered placement read
 * alongside it rather than after it (handlers/domain/placement.ts). Call once the session is verified.
 */
export async function ownedProjectForAgent(deps: Deps, accountId: string, projectId: string): Promise<ProjectForAgent> {
  const prefetched = prefetchAgent(deps, projectId);
  const project = await getOwnedProject(deps.db, projectId, accountId);
  return { project, prefetched };
}

/** Calls the project's agent on `method` `path` (shared/internal-paths.ts). */
async function askAgent<T>(deps: Deps, call: LifecycleCall, method: string, path: string, body?: unknown): Promise<T> {
  const agent = await agentFor(deps, call.project, call.prefetched);
  return deps.agents.json<T>(agent, method, path, { body, requestId: call.requestId });
}

/** Calls the project's agent on one of its internal lifecycle routes (`POST …/{op}` with the recorded state). */
export function callAgent<T>(deps: Deps, call: LifecycleCall, op: LifecycleOp, body: Record<string, unknown> = {}): Promise<T> {
  return askAgent<T>(deps, call, 'POST', internalPaths.lifecycle(call.project.id, op), { recorded: recordedOf(call.project), ...body });
}

/** The receipt fields of a deletion the owner asks for (docs/api.md "Receipts"). */
export function deletionOf(call: LifecycleCall): InternalDeletion {
  return { actor: call.project.owner, request_id: call.requestId };
}

/** The project as answered, with the state its agent now records. */
export function withState(project: ProjectRecord, state: TenantStateAnswer): Project {
  return projectView({ ...project, state: state.state, updated_at: state.updated_at });
}

/**
 * The project with its recorded state reconciled against the live process (contract "GET project";
 * docs/lifecycle.md "Reconciliation"). A record its agent marked kept is that agent's truth, which it
 * corrects itself whenever an engine exits: it is answered as read, once the agent is found live (503
 * otherwise: a record nobody keeps true any more is not answered). Any other record is reconciled
 * by the agent, which marks it kept when it holds.
 */
export async function reconciledProject(deps: Deps, call: LifecycleCall): Promise<Project> {
  if (call.project.state_kept) {
    await agentFor(deps, call.project, call.prefetched);
    return projectView(call.project);
  }
  return withState(call.project, await callAgent<TenantStateAnswer>(deps, call, 'reconcile'));
}

/** Starts the project's engine (idempotent); answers the project as now recorded. */
export async function wakeup(deps: Deps, call: LifecycleCall): Promise<Project> {
  return withState(call.project, await callAgent<TenantStateAnswer>(deps, call, 'wakeup'));
}

/** Stops the project's engine (idempotent); answers the project as now recorded. */
export async function sleep(deps: Deps, call: LifecycleCall): Promise<Project> {
  return withState(call.project, await callAgent<TenantStateAnswer>(deps, call, 'sleep'));
}

/** The engine's head as the agent reports it. */
export function head(deps: Deps, call: LifecycleCall): Promise<Record<string, unknown>> {
  return callAgent<Record<string, unknown>>(deps, call, 'head');
}

/** Takes a snapshot through the agent; answers the snapshot as recorded. */
export function createSnapshot(deps: Deps, call: LifecycleCall & { label: string | null }): Promise<Record<string, unknown>> {
  return callAgent<Record<string, unknown>>(deps, call, 'snapshots', { label: call.label });
}

/** Restores a snapshot through the agent; answers what the agent answers. */
export function restore(deps: Deps, call: LifecycleCall & { snapshotId: string }): Promise<Record<string, unknown>> {
  return callAgent<Record<string, unknown>>(deps, call, 'restore', { snapshot_id: call.snapshotId });
}

/** One page of the project's snapshots, newest first. */
export function listProjectSnapshots(deps: Deps, projectId: string, query: PageQuery): Promise<AnsweredPage<Snapshot>> {
  return pageOf(deps, ['snapshots', projectId], query, (limit, after) => listSnapshots(deps.db, projectId, limit, after));
}

/** One snapshot of the project; 404 when it has none by that id. */
export async function snapshotOf(deps: Deps, projectId: string, snapshotId: string): Promise<Snapshot> {
  const snapshot = await getSnapshot(deps.db, projectId, snapshotId);
  if (!snapshot) throw errors.notFound(`snapshot ${snapshotId} not found`);
  return snapshot;
}

/**
 * Deletes one snapshot of the project, row and backup directory, receipted `snapshot.delete`;
 * answers the snapshot as it was. 404 unknown; 409 `conflict` while it is restored or taken.
 */
export function deleteSnapshot(deps: Deps, call: LifecycleCall & { snapshotId: string }): Promise<Snapshot> {
  return askAgent<Snapshot>(deps, call, 'DELETE', internalPaths.snapshot(call.project.id, call.snapshotId), deletionOf(call));
}

/** One page of the project's previous data directories, newest first, as its agent finds them. */
export function listReplacedDirs(deps: Deps, call: LifecycleCall, query: PageQuery): Promise<AnsweredPage<ReplacedDir>> {
  return pageOf(deps, ['replaced', call.project.id], query, async (limit, after) => {
    const params = new URLSearchParams({ limit: String(limit), ...(after === undefined ? {} : { after }) });
    const page = await askAgent<ReplacedPage>(deps, call, 'GET', `${internalPaths.replaced(call.project.id)}?${params}`);
    return { items: page.items, nextCursor: page.next };
  });
}

/** Frees one previous data directory of the project, receipted `replaced.delete`; answers it as it was. 404 unknown. */
export function discardReplacedDir(deps: Deps, call: LifecycleCall & { name: string }): Promise<ReplacedDir> {
  return askAgent<ReplacedDir>(deps, call, 'DELETE', internalPaths.replacedDir(call.project.id, encodeURIComponent(call.name)), deletionOf(call));
}
