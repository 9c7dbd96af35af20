/** Calls from this agent to another agent's internal API (docs/durability.md): signed like the handlers' calls. */
import { createAgentClient, type AgentClient } from '../../shared/agent-client.ts';
import type { AgentContext } from '../context.ts';

const clients = new WeakMap<AgentContext, AgentClient>();

/** The internal-API client of this agent (one per agent, signing with `SVCD_INTERNAL_SECRET`). */
export function agentCalls(ctx: AgentContext): AgentClient {
  let client = clients.get(ctx);
  if (!client) {
    client = createAgentClient(ctx.settings.SVCD_INTERNAL_SECRET);
    clients.set(ctx, client);
  }
  return client;
}
