/** Route: `GET /v0/health`, unauthenticated liveness of the handlers (DESIGN §2). */
import type { RouterType } from 'itty-router';
import { nowIso } from '../shared/time.ts';
import type { Ctx } from './context.ts';
import { json } from './http.ts';

/** Registers the health route. */
export function register(router: RouterType<Request, [Ctx]>): void {
  router.get('/v0/health', (_request, ctx) => json({ status: 'ok', time: nowIso(ctx.deps.now()) }));
}
