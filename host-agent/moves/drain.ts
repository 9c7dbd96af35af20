/**
 * Drain (docs/durability.md "Drain"; docs/deploy.md "Rolling out"): this agent stops taking new
 * projects (`draining` on its registration, which placement skips) and moves every project it
 * hosts to other live agents, a running tenant slept first and woken on its new agent.
 */
import { projectsOn, setAgentStatus } from '../../shared/db/moves.ts';
import { newRequestId } from '../../shared/ids.ts';
import type { AgentContext } from '../context.ts';
import { bounded } from '../tenants/processes.ts';
import { relocateProject } from './relocate.ts';

/** One line of a drain's or a recovery's progress (the NDJSON the operator command prints). */
export type Progress =
  | { event: 'start'; projects: number }
  | { event: 'moved'; project: string; to: string; state: string; snapshot_id: string | null }
  | { event: 'failed'; project: string; error: string }
  | { event: 'done'; moved: number; failed: number };

/** How many projects move at once (each move is mostly disk and network bound). */
const MOVES_AT_ONCE = 2;

/** Drains this agent; `report` hears each project's outcome. Answers the last line. */
export async function drainAgent(ctx: AgentContext, report: (line: Progress) => void): Promise<Progress> {
  await setAgentStatus(ctx.db, ctx.agentId, 'draining');
  const projects = await projectsOn(ctx.db, ctx.agentId);
  report({ event: 'start', projects: projects.length });
  let moved = 0;
  let failed = 0;
  const requestId = newRequestId();
  await bounded(projects, MOVES_AT_ONCE, async (project) => {
    try {
      const done = await relocateProject(ctx, project.id, { actor: `agent:${ctx.agentId}`, request_id: requestId }, { moveRunning: true });
      moved++;
      report({ event: 'moved', project: project.id, to: done.to, state: done.state, snapshot_id: done.snapshot_id });
    } catch (err) {
      failed++;
      report({ event: 'failed', project: project.id, error: (err as Error).message });
    }
  });
  const last: Progress = { event: 'done', moved, failed };
  report(last);
  ctx.log(`agent: drained: ${moved} projects moved, ${failed} failed`, { level: failed > 0 ? 'warn' : 'info', event: 'agent.drain', moved, failed });
  return last;
}

/** Takes projects again (an operator's `undrain` after maintenance on the same machine). */
export async function undrainAgent(ctx: AgentContext): Promise<void> {
  await setAgentStatus(ctx.db, ctx.agentId, null);
}
