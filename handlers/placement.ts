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
 * The live agent hosting `project`'s tenant: registered and heartbeating within
 * `SVCD_AGENT_STALE_MS`, else 503 `orchestrator_unavailable`.
 *
 * The agent's pin is deliberately not judged here: the agent re-runs its pin check before every
 * engine start (issue #4 rule 2) and answers 503 itself when the engine cannot run, so a fixed
 * binary is picked up at once and routes that need no engine (storage, realtime, keys) keep working
 * on a host whose engine is broken.
 */
export async function agentFor(ctx: Ctx, project: Pick<ProjectRecord, 'id' | 'agent_id'>): Promise<AgentRecord> {
  const agent = await getAgent(ctx.deps.db, project.agent_id);
  if (!agent) throw errors.orchestrator(`the host agent of project ${project.id} is not registered`);
  const age = ctx.deps.now() - Date.parse(agent.heartbeat_at);
  if (!(age <= ctx.deps.settings.SVCD_AGENT_STALE_MS)) {
    throw errors.orchestrator(`the host agent of project ${project.id} is not answering (last heartbeat ${agent.heartbeat_at})`);
  }
  return agent;
}
