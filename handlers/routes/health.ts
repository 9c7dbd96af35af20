/**
 * Route: `GET /v0/health`, unauthenticated: the handlers answer, and whether any host agent can run
 * tenants (docs/api.md "Decisions": Health). An agent counts as live as placement judges it (heartbeat within
 * SVCD_AGENT_STALE_MS and a working engine pin, `agentIsLive`), so "ok" here means a new project
 * could be placed and woken. No live agent: 503 in the error envelope, with the figures beside it.
 * Never names an agent's address or any secret.
 */
import { agentIsLive, listAgents } from '../../shared/db/agents.ts';
import { envelopeOf, errors } from '../../shared/errors.ts';
import { nowIso } from '../../shared/time.ts';
import type { Routes } from '../context.ts';
import { json } from '../http.ts';

const NO_STORE = { 'cache-control': 'no-store' };

/** Registers the health route. */
export function register(router: Routes): void {
  router.get('/v0/health', async (_request, ctx) => {
    const { deps } = ctx;
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
      deps.log(`request ${ctx.requestId}: health cannot read the agent registry: ${(err as Error).message}`);
      const down = errors.orchestrator('the host-agent registry cannot be read');
      return json({ ...envelopeOf(down), status: 'degraded', time, agents: null }, down.status, NO_STORE);
    }
    if (live > 0) return json({ status: 'ok', time, agents: { live, total } }, 200, NO_STORE);
    const none = errors.orchestrator(
      total === 0 ? 'no live host agent: none is registered' : `no live host agent: none of the ${total} registered has heartbeated lately with a working engine`,
    );
    return json({ ...envelopeOf(none), status: 'degraded', time, agents: { live, total } }, none.status, NO_STORE);
  });
}
