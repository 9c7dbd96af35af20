/**
 * "Which host agent owns this project?" (DESIGN §3 Lifecycle: every call for a project goes to the
 * agent recorded at creation). Shared by every route that reaches an agent: lifecycle, storage,
 * realtime, keys, secrets. A tenant is never moved: an agent that is gone or stale answers 503
 * `orchestrator_unavailable`, it is not replaced by another one.
 */
import type { AgentRecord } from '../shared/db/agents.ts';
import { getAgent } from '../shared/db/agents.ts';
import type { ProjectRecord } from '../shared/db/projects.ts';
import { errors } from '../shared/errors.ts';
import type { Ctx } from './context.ts';

/**
 * Placements this isolate has seen live in `deps.placements` (project id → agent id). A tenant is
 * never moved, so the agent a project was recorded on is known before the project is read again: its
 * record can then be read alongside the project's instead of after it (one DynamoDB round trip less
 * on the critical path of wakeup and every other agent call). Only a hint: the project's own
 * `agent_id` is always compared, and the agent record is always read fresh on the request. Bounded;
 * forgotten wholesale when full.
 */
const PLACEMENTS_MAX = 10_000;

/** The agent record of a project's remembered placement, being read: pass it on to `agentFor`. */
export interface AgentPrefetch {
  agentId: string;
  record: Promise<AgentRecord | null>;
}

/**
 * Starts reading the agent record of `projectId`'s remembered placement, or answers undefined when
 * this isolate has not seen the project yet. Call it only after the caller is authenticated.
 */
export function prefetchAgent(ctx: Ctx, projectId: string): AgentPrefetch | undefined {
  const agentId = ctx.deps.placements.get(projectId);
  if (agentId === undefined) return undefined;
  const record = getAgent(ctx.deps.db, agentId);
  // Awaited by agentFor when the project is owned; otherwise dropped without an unhandled rejection.
  record.catch(() => {});
  return { agentId, record };
}

/**
 * The live agent hosting `project`'s tenant: registered and heartbeating within
 * `SVCD_AGENT_STALE_MS`, else 503 `orchestrator_unavailable`. `prefetched` (from `prefetchAgent`) is
 * used only when it names the project's own agent.
 *
 * The agent's pin is deliberately not judged here: the agent re-runs its pin check before every
 * engine start (issue #4 rule 2) and answers 503 itself when the engine cannot run, so a fixed
 * binary is picked up at once and routes that need no engine (storage, realtime, keys) keep working
 * on a host whose engine is broken.
 */
export async function agentFor(ctx: Ctx, project: Pick<ProjectRecord, 'id' | 'agent_id'>, prefetched?: AgentPrefetch): Promise<AgentRecord> {
  const agent = await (prefetched?.agentId === project.agent_id ? prefetched.record : getAgent(ctx.deps.db, project.agent_id));
  const placements = ctx.deps.placements;
  if (placements.get(project.id) !== project.agent_id) {
    if (placements.size >= PLACEMENTS_MAX) placements.clear();
    placements.set(project.id, project.agent_id);
  }
  if (!agent) throw errors.orchestrator(`the host agent of project ${project.id} is not registered`);
  const age = ctx.deps.now() - Date.parse(agent.heartbeat_at);
  if (!(age <= ctx.deps.settings.SVCD_AGENT_STALE_MS)) {
    throw errors.orchestrator(`the host agent of project ${project.id} is not answering (last heartbeat ${agent.heartbeat_at})`);
  }
  return agent;
}
