/**
 * Health (docs/api.md "Decisions": Health): whether any host agent can run tenants. An agent counts
 * as live as placement judges it (heartbeat within SVCD_AGENT_STALE_MS and a working engine pin,
 * `agentIsLive`), so "ok" means a new project could be placed and woken. Never names an agent's
 * address or any secret.
 */
import { agentIsLive, listAgents } from '../../shared/db/agents.ts';
import { errors, type ServiceError } from '../../shared/errors.ts';
import { nowIso } from '../../shared/time.ts';
import type { Deps } from '../context.ts';

/** The figures of a health answer; `problem` is set when no agent can run tenants. */
export interface Health {
  time: string;
  /** Live and registered agents; null when the registry cannot be read. */
  agents: { live: number; total: number } | null;
  problem: ServiceError | null;
}

/** Counts the live agents; a registry that cannot be read is a problem, logged with `requestId`. */
export async function health(deps: Deps, requestId: string): Promise<Health> {
  const now = deps.now();
  const time = nowIso(now);
  let live: number;
  let total: number;
  try {
    const agents = await listAgents(deps.db);
    total = agents.length;
    live = agents.filter((a) => agentIsLive(a, deps.settings.SVCD_AGENT_STALE_MS, now)).length;
  } catch (err) {
    // The registry is the metadata store: when it cannot be read, nothing tenant-related works.
    deps.log(`request ${requestId}: health cannot read the agent registry: ${(err as Error).message}`);
    return { time, agents: null, problem: errors.orchestrator('the host-agent registry cannot be read') };
  }
  if (live > 0) return { time, agents: { live, total }, problem: null };
  const problem = errors.orchestrator(
    total === 0 ? 'no live host agent: none is registered' : `no live host agent: none of the ${total} registered has heartbeated lately with a working engine`,
  );
  return { time, agents: { live, total }, problem };
}
