/**
 * Route: `GET /v0/projects/{id}/logs?tail=N[&follow=1]`, the tenant's recent engine log lines for
 * the owner session only (docs/observability.md "Engine logs"): JSON `{project, lines}`, or with
 * `follow=1` Server-Sent Events (`event: line`, `data:` the line as a JSON string) passed through
 * from the host agent unbuffered until the client leaves.
 */
import { logs } from '../../shared/api/index.ts';
import { SSE_HEADERS } from '../../shared/realtime/events.ts';
import { LOGS_TAIL_DEFAULT } from '../../shared/schemas/logs.ts';
import { requireProjectForAgent } from '../auth.ts';
import { engineLogs } from '../domain/logs.ts';
import { json } from '../http.ts';
import { implement } from '../implement.ts';

export const implementations = [
  implement(logs.engineLogs, requireProjectForAgent, async ({ caller, query, request }, ctx) => {
    const answer = await engineLogs(ctx.deps, {
      ...caller,
      requestId: ctx.requestId,
      tail: query.tail ?? LOGS_TAIL_DEFAULT,
      follow: query.follow ? { signal: request.signal } : null,
    });
    if (answer.kind === 'lines') return json(answer.answer, 200, { 'cache-control': 'no-store' });
    return new Response(answer.body, { status: 200, headers: { ...SSE_HEADERS } });
  }),
];
