/**
 * "Which host agent owns this project?" Every call for a project goes to the agent recorded at its
 * creation (docs/architecture.md "Pieces"). Shared by every rule that reaches an agent: lifecycle,
 * storage, realtime, keys, secrets. A tenant moves only when its owner or an operator moves it (docs/durability.md): an agent that is gone or stale answers
 * 503 `orchestrator_unavailable`, it is not replaced by another one.
 *
 * The isolate's placement hints (`deps.placement`) let the agent record of a project seen before be
 * read alongside the project instead of after it (one DynamoDB round trip less on the critical path
 * of wakeup and every other agent call). Only hints: the project's own `agent_id` is always
 * compared, and the agent record is read fresh unless the caller allows a recent one.
 */
import type { AgentRecord } from '../../shared/db/agents.ts';
import { getAgent, toAgentRecord } from '../../shared/db/agents.ts';
import type { ItemsRead, TableKey } from '../../shared/db/client.ts';
import type { ProjectRecord } from '../../shared/db/projects.ts';
import { keys } from '../../shared/db/table.ts';
import { errors } from '../../shared/errors.ts';
import type { Deps } from '../context.ts';

/** The agent record of a project's remembered placement, being read: pass it on to `agentFor`. */
export interface AgentPrefetch {
  agentId: string;
  record: Promise<AgentRecord | null>;
}

/**
 * Starts reading the agent record of `projectId`'s remembered placement, or answers undefined when
 * this isolate has not seen the project yet. Call it only after the caller is authenticated.
 */
export function prefetchAgent(deps: Deps, projectId: string): AgentPrefetch | undefined {
  const agentId = deps.placement.placementOf(projectId);
  if (agentId === undefined) return undefined;
  const record = getAgent(deps.db, agentId);
  // Awaited by agentFor when the project is owned; otherwise dropped without an unhandled rejection.
  record.catch(() => {});
  return { agentId, record };
}

/**
 * The agent record to read in the same round trip as `projectId`'s project (one BatchGetItem with
 * the session's standing): its remembered placement's, or none when this isolate has not seen the
 * project yet. Pass the items read to `prefetchedIn`.
 */
export function agentToReadWith(deps: Deps, projectId: string): { agentId: string; key: TableKey } | undefined {
  const agentId = deps.placement.placementOf(projectId);
  return agentId === undefined ? undefined : { agentId, key: keys.agent(agentId) };
}

/** The prefetch of `agentToReadWith`'s agent, from the items read with it. */
export function prefetchedIn(agentId: string, items: ItemsRead): AgentPrefetch {
  const item = items.get(keys.agent(agentId));
  return { agentId, record: Promise.resolve(item ? toAgentRecord(item) : null) };
}

/**
 * How long a record this isolate read may stand in for a fresh read, where the caller allows it
 * (the storage byte routes: one DynamoDB round trip less per request). Far below
 * SVCD_AGENT_STALE_MS, and never trusted past it (see agentFor).
 */
export const AGENT_RECORD_REUSE_MS = 2_000;

/** Options of `agentFor`. */
export interface AgentForOptions {
  /** Use an agent record this isolate read within AGENT_RECORD_REUSE_MS instead of reading it again. */
  reuse?: boolean;
}

/**
 * The live agent hosting `project`'s tenant: registered and heartbeating within
 * `SVCD_AGENT_STALE_MS`, else 503 `orchestrator_unavailable`. `prefetched` (from `prefetchAgent`) is
 * used only when it names the project's own agent.
 *
 * With `reuse`, a record read lately stands in for a fresh read. It can only err towards "not
 * live": a fresh read would show the same or a later heartbeat, so a remembered record judged live
 * would be judged live fresh too, and one that looks stale is read again before anyone is told so.
 * What it cannot see is an agent that moved to another address; callers that reuse must call
 * `deps.placement.forgetAgent` when the agent does not answer, so the next request reads the
 * record again.
 *
 * The agent's pin is deliberately not judged here: the agent re-runs its pin check before every
 * engine start (docs/engine.md) and answers 503 itself when the engine cannot run, so a fixed
 * binary is picked up at once and routes that need no engine (storage, realtime, keys) keep working
 * on a host whose engine is broken.
 */
export async function agentFor(
  deps: Deps,
  project: Pick<ProjectRecord, 'id' | 'agent_id'>,
  prefetched?: AgentPrefetch,
  { reuse = false }: AgentForOptions = {},
): Promise<AgentRecord> {
  deps.placement.rememberPlacement(project.id, project.agent_id);
  if (reuse) {
    const known = deps.placement.agentRecord(project.agent_id, AGENT_RECORD_REUSE_MS);
    if (known && isLive(deps, known)) return known;
  }
  const agent = await (prefetched?.agentId === project.agent_id ? prefetched.record : getAgent(deps.db, project.agent_id));
  if (!agent) {
    deps.placement.forgetAgent(project.agent_id);
    throw errors.orchestrator(`the host agent of project ${project.id} is not registered`);
  }
  deps.placement.rememberAgent(agent);
  if (!isLive(deps, agent)) {
    throw errors.orchestrator(`the host agent of project ${project.id} is not answering (last heartbeat ${agent.heartbeat_at})`);
  }
  return agent;
}

/**
 * The agent `projectId` was last seen placed on, when this isolate read its record within
 * AGENT_RECORD_REUSE_MS and it was live: without a DynamoDB read, so before the project itself is
 * read. A hint only: the caller must still compare it with the project's `agent_id`.
 */
export function rememberedAgent(deps: Deps, projectId: string): AgentRecord | null {
  const agentId = deps.placement.placementOf(projectId);
  const known = agentId === undefined ? undefined : deps.placement.agentRecord(agentId, AGENT_RECORD_REUSE_MS);
  if (!known || !isLive(deps, known)) return null;
  return known;
}

function isLive(deps: Deps, agent: AgentRecord): boolean {
  const age = deps.now() - Date.parse(agent.heartbeat_at);
  return age <= deps.settings.SVCD_AGENT_STALE_MS;
}
