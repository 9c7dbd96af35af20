/**
 * The agent's internal HTTP API (docs/architecture.md; docs/lifecycle.md "Internal API"). Every request must carry a valid short-lived internal
 * JWT and is refused before any routing or work without one. Route modules register themselves like
 * the public handlers do; errors use the same envelope.
 */
import { Router, type IRequest, type RouterType } from 'itty-router';
import { errorResponse, errors } from '../shared/errors.ts';
import { newRequestId } from '../shared/ids.ts';
import type { AgentContext } from './context.ts';
import { json } from '../shared/http/body.ts';
import { internalPaths } from '../shared/internal-paths.ts';

/** Arguments every internal route receives after the request. */
export type InternalRouter = RouterType<IRequest, [AgentContext]>;

/** A module of internal routes. */
export interface InternalRoutes {
  register(router: InternalRouter): void;
}

/** Builds the internal API over the agent context and route modules. */
export function createInternalApi(ctx: AgentContext, modules: InternalRoutes[]): (request: Request) => Promise<Response> {
  const router: InternalRouter = Router();
  router.get(internalPaths.health(), () =>
    json({ agent_id: ctx.agentId, pin_ok: ctx.pin.ok, engine: ctx.pin.version, reason: ctx.pin.reason }),
  );
  for (const m of modules) m.register(router);

  return async (request) => {
    const requestId = request.headers.get('x-request-id') ?? newRequestId();
    let response: Response;
    try {
      await ctx.internalTokens.check(request.headers.get('authorization'));
      const answer = (await router.fetch(request as never, ctx)) as Response | undefined;
      if (!answer) throw errors.notFound(`no internal route for ${request.method} ${new URL(request.url).pathname}`);
      response = answer;
    } catch (thrown) {
      response = errorResponse(thrown, requestId, ctx.log);
    }
    return response;
  };
}
