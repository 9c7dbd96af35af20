/**
 * Drain (docs/durability.md "Drain"; docs/deploy.md "Rolling out"): this agent stops taking new
 * projects (`draining` on its registration, which placement skips) and moves every project it
 * hosts to other live agents, a running tenant slept first and woken on its new agent.
 */
import { projectsOn, setAgentStatus } from '../../shared/db/moves.ts';
import { newRequestId } from '../../shared/ids.ts';
import type { AgentContext } from '../context.ts';
import { moveEach, type Progress } from './hand-over.ts';
import { relocateProject } from './relocate.ts';

/** Drains this agent; `report` hears each project's outcome. Answers the last line. */
export async function drainAgent(ctx: AgentContext, report: (line: Progress) => void): Promise<Progress> {
  await setAgentStatus(ctx.db, ctx.agentId, 'draining');
  const projects = await projectsOn(ctx.db, ctx.agentId);
  const requestId = newRequestId();
  const last = await moveEach(projects, (project) => relocateProject(ctx, project.id, { actor: `agent:${ctx.agentId}`, request_id: requestId }, { moveRunning: true }), report);
  const { moved, failed } = last;
  ctx.log(`agent: drained: ${moved} projects moved, ${failed} failed`, { level: failed > 0 ? 'warn' : 'info', event: 'agent.drain', moved, failed });
  return last;
}

/** Takes projects again (an operator's `undrain` after maintenance on the same machine). */
export async function undrainAgent(ctx: AgentContext): Promise<void> {
  await setAgentStatus(ctx.db, ctx.agentId, null);
}
