/**
 * Routes: realtime (contract "POST /v0/projects/{id}/realtime/publish", "Events"; docs/realtime.md).
 * - `POST .../realtime/publish`: owner session only; the hub in the project's host agent assigns `id`
 *   and `ts`; answers the event as delivered, byte for byte.
 * - `GET .../realtime/subscribe?channel=a&channel=b`: Server-Sent Events, for the owner session or a
 *   project key of that project. The agent's event stream is passed through unchanged, never
 *   buffered; a client that goes away cancels the body, which closes the upstream connection.
 */
import { parseBearer } from '../../shared/auth.ts';
import { SSE_HEADERS } from '../../shared/realtime.ts';
import { publishRequestSchema, subscribeQuerySchema } from '../../shared/schemas/realtime.ts';
import { requireOwnedProject } from '../auth.ts';
import type { Routes } from '../context.ts';
import { authorizeSubscriber, publish, subscribe } from '../domain/realtime.ts';
import { noBody, queryOf, readJson } from '../http.ts';

/** Registers the realtime routes. */
export function register(router: Routes): void {
  router.post('/v0/projects/:id/realtime/publish', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const body = await readJson(request, publishRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    const delivered = await publish(ctx.deps, { requestId: ctx.requestId, project, channel: body.channel, event: body.event, payload: body.payload });
    return new Response(delivered, { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' } });
  });

  router.get('/v0/projects/:id/realtime/subscribe', async (request, ctx) => {
    const subscriber = await authorizeSubscriber(ctx.deps, { token: parseBearer(request.headers), projectIdParam: request.params.id });
    const { channel: channels } = queryOf(new URL(request.url), subscribeQuerySchema, { repeatable: ['channel'] });
    await noBody(request);
    const events = await subscribe(ctx.deps, { requestId: ctx.requestId, subscriber, channels, signal: request.signal });
    return new Response(events, { status: 200, headers: { ...SSE_HEADERS } });
  });
}
