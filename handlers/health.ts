/** Route: `GET /v0/health`, unauthenticated liveness of the handlers (DESIGN §2). */
import { nowIso } from '../shared/time.ts';
import type { Routes } from './context.ts';
import { json } from './http.ts';

/** Registers the health route. */
export function register(router: Routes): void {
  router.get('/v0/health', (_request, ctx) => json({ status: 'ok', time: nowIso(ctx.deps.now()) }));
}
