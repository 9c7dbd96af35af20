/**
 * Route: `GET /v0/health`, unauthenticated: the handlers answer, and whether any host agent can run
 * tenants (handlers/domain/health.ts). No live agent: 503 in the error envelope, with the figures
 * beside it.
 */
import { service } from '../../shared/api/index.ts';
import { envelopeOf } from '../../shared/errors.ts';
import { health } from '../domain/health.ts';
import { json } from '../http.ts';
import { implement } from '../implement.ts';

const NO_STORE = { 'cache-control': 'no-store' };

export const implementations = [
  implement(service.health, async (_call, ctx) => {
    const { time, agents, problem } = await health(ctx.deps, ctx.requestId);
    if (!problem) return json({ status: 'ok', time, agents }, 200, NO_STORE);
    return json({ ...envelopeOf(problem), status: 'degraded', time, agents }, problem.status, NO_STORE);
  }),
];
