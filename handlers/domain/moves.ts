/**
 * Moves the owner asks for (docs/durability.md): relocation of a sleeping project to another host
 * agent (done by its agent, which commits the move), and a fork — a new project whose data is a
 * snapshot of a project the caller owns. A fork's copy is taken in by its agent before the project
 * item is written, so a crash in between leaves no project, only a copy that agent's start removes.
 */
import { agentIsLive, choosePlacement, listAgents, type AgentRecord } from '../../shared/db/agents.ts';
import { createProject as putProject, getOwnedProject, getProject, listProjects, projectView, type ProjectRecord } from '../../shared/db/projects.ts';
import { getSnapshot, type Snapshot } from '../../shared/db/snapshots.ts';
import { errors } from '../../shared/errors.ts';
import { newId } from '../../shared/ids.ts';
import { internalPaths } from '../../shared/internal-paths.ts';
import type { Offsite } from '../../shared/db/snapshots.ts';
import type { Project } from '../../shared/schemas/projects.ts';
import { nowIso } from '../../shared/time.ts';
import type { Deps } from '../context.ts';
import type { LifecycleCall } from './lifecycle.ts';
import { agentFor } from './placement.ts';

/** Moves the project to another agent (its agent does it); answers the project on its new agent. */
export async function relocate(deps: Deps, call: LifecycleCall & { targetAgent?: string | undefined }): Promise<Project> {
  const agent = await agentFor(deps, call.project, call.prefetched);
  await deps.agents.json(agent, 'POST', internalPaths.relocate(call.project.id), {
    body: { target_agent: call.targetAgent ?? null, actor: call.project.owner, request_id: call.requestId },
    requestId: call.requestId,
  });
  const moved = await getProject(deps.db, call.project.id);
  if (!moved) throw errors.notFound(`project ${call.project.id} not found`);
  return projectView(moved);
}

/** What a fork asks for. */
export interface ForkInput {
  owner: string;
  name: string;
  fromSnapshot: string;
  fromProject?: string | undefined;
  requestId: string;
}

/** Creates a project whose data is the snapshot (a sleeping project with a data directory). */
export async function forkProject(deps: Deps, input: ForkInput): Promise<Project> {
  const { project: source, snapshot } = await snapshotOfOwner(deps, input);
  const agents = await listAgents(deps.db);
  const target = await forkTarget(deps, agents, source, snapshot, input.requestId);
  const at = nowIso(deps.now());
  const record: ProjectRecord = {
    id: newId('prj'),
    name: input.name,
    state: 'sleeping',
    created_at: at,
    updated_at: at,
    owner: input.owner,
    agent_id: target.agent_id,
    // The agent's truth from the start: a data directory and no engine (docs/lifecycle.md "Reconciliation").
    state_kept: true,
  };
  await deps.agents.json(target, 'POST', internalPaths.receive(record.id), {
    body: { reason: 'fork', snapshot_id: snapshot.id, from_project: source.id },
    requestId: input.requestId,
  });
  try {
    await putProject(deps.db, record);
  } catch (err) {
    await deps.agents.json(target, 'DELETE', internalPaths.receive(record.id)).catch(() => {});
    throw err;
  }
  return projectView(record);
}

/**
 * The agent a fork lands on: the source project's own when it is live and takes projects (its
 * backup is a local copy there), else the least-loaded live one, which fetches the snapshot's
 * off-machine copy (shipped first by the source's agent when it is not complete yet).
 */
async function forkTarget(deps: Deps, agents: AgentRecord[], source: ProjectRecord, snapshot: Snapshot, requestId: string): Promise<AgentRecord> {
  const staleMs = deps.settings.SVCD_AGENT_STALE_MS;
  const home = agents.find((a) => a.agent_id === source.agent_id);
  if (home && home.status === undefined && agentIsLive(home, staleMs, deps.now())) return home;
  const target = choosePlacement(agents, staleMs, deps.now());
  if (!target) throw errors.orchestrator('no live host agent can run tenants');
  if (snapshot.offsite.state === 'complete') return target;
  const sourceAgent = await agentFor(deps, source);
  const offsite = await deps.agents.json<Offsite>(sourceAgent, 'POST', internalPaths.ship(source.id, snapshot.id), { requestId });
  if (offsite.state !== 'complete') throw errors.orchestrator('the snapshot has no off-machine copy for another host agent to fork from');
  return target;
}

/** The snapshot and its project, which must be the caller's: 404 otherwise, as for any project not theirs. */
async function snapshotOfOwner(deps: Deps, input: ForkInput): Promise<{ project: ProjectRecord; snapshot: Snapshot }> {
  const notFound = () => errors.notFound(`snapshot ${input.fromSnapshot} not found in your projects`);
  if (input.fromProject) {
    const project = await getOwnedProject(deps.db, input.fromProject, input.owner);
    const snapshot = await getSnapshot(deps.db, project.id, input.fromSnapshot);
    if (!snapshot) throw notFound();
    return { project, snapshot };
  }
  let cursor: string | undefined;
  do {
    const page = await listProjects(deps.db, input.owner, 100, cursor);
    const found = await Promise.all(page.items.map(async (project) => ({ project, snapshot: await getSnapshot(deps.db, project.id, input.fromSnapshot) })));
    const hit = found.find((f) => f.snapshot !== null);
    if (hit?.snapshot) return { project: hit.project, snapshot: hit.snapshot };
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  throw notFound();
}
