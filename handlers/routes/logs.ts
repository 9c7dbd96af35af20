/**
 * Route: `GET /v0/projects/{id}/logs?tail=N[&follow=1]`, the tenant's recent engine log lines for
 * the owner session only (docs/observability.md "Engine logs"): JSON `{project, lines}`, or with
 * `follow=1` Server-Sent Events (`event: line`, `data:` the line as a JSON string) passed through
 * from the host agent unbuffered until the client leaves.
 */
import { SSE_HEADERS } from '../../shared/realtime.ts';
import { LOGS_TAIL_DEFAULT, logsQuerySchema } from '../../shared/schemas/logs.ts';
import { requireProjectForAgent } from '../auth.ts';
import type { Routes } from '../context.ts';
import { engineLogs } from '../domain/logs.ts';
import { json, noBody, queryOf } from '../http.ts';

/** Registers the engine-log route. */
export function register(router: Routes): void {
  router.get('/v0/projects/:id/logs', async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    const query = queryOf(new URL(request.url), logsQuerySchema);
    await noBody(request);
    const logs = await engineLogs(ctx.deps, {
      ...owned,
      requestId: ctx.requestId,
      tail: query.tail ?? LOGS_TAIL_DEFAULT,
      follow: query.follow ? { signal: request.signal } : null,
    });
    if (logs.kind === 'lines') return json(logs.answer, 200, { 'cache-control': 'no-store' });
    return new Response(logs.body, { status: 200, headers: { ...SSE_HEADERS } });
  });
}
