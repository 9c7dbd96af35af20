/**
 * The moves of projects between agents (docs/durability.md), as the agent's start wires them: the
 * sweep of copies this agent does not host (before any listener opens), and the pass over lost
 * agents beside the heartbeat.
 */
import { getAgent } from '../../shared/db/agents.ts';
import { setAgentStatus } from '../../shared/db/moves.ts';
import { internalPaths } from '../../shared/internal-paths.ts';
import type { AgentContext } from '../context.ts';
import { agentCalls } from './calls.ts';
import { lostAgentsPass } from './lost.ts';
import { sweepStaleCopies } from './stale.ts';

/** Sweeps stale copies; answers whether this agent had been declared lost (it serves none of its old projects). */
export async function sweepBeforeServing(ctx: AgentContext): Promise<void> {
  const lost = (await getAgent(ctx.db, ctx.agentId))?.status === 'lost';
  if (lost) ctx.log('agent: this agent was declared lost: its projects are restored elsewhere, and its copies here are removed', { level: 'warn', event: 'agent.lost' });
  await sweepStaleCopies(ctx, lost);
}

/** Tells agent `agentId` to forget its placement of `projectId` (the `/v2` listener found it stale). */
export async function tellMoved(ctx: AgentContext, agentId: string, projectId: string): Promise<void> {
  const agent = await getAgent(ctx.db, agentId);
  if (agent) await agentCalls(ctx).json(agent, 'POST', internalPaths.placementChanged(projectId), { signal: AbortSignal.timeout(2000) });
}

/** Starts the lost-agent pass every `SVCD_HEARTBEAT_MS`; answers its stop. */
export function watchLostAgents(ctx: AgentContext): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    pass(ctx)
      .catch((err: Error) => ctx.log(`agent: the lost-agent pass failed: ${err.message}`))
      .finally(() => (running = false));
  }, ctx.settings.SVCD_HEARTBEAT_MS);
  timer.unref();
  return () => clearInterval(timer);
}

async function pass(ctx: AgentContext): Promise<void> {
  const me = await getAgent(ctx.db, ctx.agentId);
  // Back after being declared lost: it takes projects again once none is placed on it any more.
  if (me?.status === 'lost' && me.tenants <= 0) {
    await setAgentStatus(ctx.db, ctx.agentId, null);
    ctx.log('agent: every project of this agent was brought back elsewhere: it takes projects again', { level: 'info', event: 'agent.lost' });
  }
  await lostAgentsPass(ctx);
}
