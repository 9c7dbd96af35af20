/**
 * Routes: realtime (contract "POST /v0/projects/{id}/realtime/publish", "Events"; docs/realtime.md).
 * - `POST .../realtime/publish`: owner session only; the hub in the project's host agent assigns `id`
 *   and `ts`; answers the event as delivered, byte for byte.
 * - `POST .../realtime/tickets`: a single-use ticket for a browser's subscription, for the owner
 *   session or a project key of that project (docs/realtime.md "Browsers: tickets").
 * - `GET .../realtime/subscribe?channel=a&channel=b[&ticket=…]`: Server-Sent Events, for the owner
 *   session or a project key of that project in `Authorization`, or a ticket in the URL — never a
 *   long-lived credential there. The agent's event stream is passed through unchanged, never
 *   buffered; a client that goes away cancels the body, which closes the upstream connection.
 */
import { parseBearer } from '../../shared/auth.ts';
import { refuseUrlCredentials, SSE_HEADERS } from '../../shared/realtime.ts';
import { errors } from '../../shared/errors.ts';
import { publishRequestSchema, subscribeQuerySchema, ticketRequestSchema } from '../../shared/schemas/realtime.ts';
import { requireOwnedProject } from '../auth.ts';
import type { Routes } from '../context.ts';
import { authorizeSubscriber, issueTicket, publish, redeemSubscriberTicket, subscribe, type Subscriber } from '../domain/realtime.ts';
import { json, noBody, noQuery, queryOf, readJson } from '../http.ts';

/** Registers the realtime routes. */
export function register(router: Routes): void {
  router.post('/v0/projects/:id/realtime/publish', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const body = await readJson(request, publishRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    const delivered = await publish(ctx.deps, { requestId: ctx.requestId, project, channel: body.channel, event: body.event, payload: body.payload });
    return new Response(delivered, { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' } });
  });

  router.post('/v0/projects/:id/realtime/tickets', async (request, ctx) => {
    const subscriber = await authorizeSubscriber(ctx.deps, { token: parseBearer(request.headers), projectIdParam: request.params.id });
    noQuery(new URL(request.url));
    const body = await readJson(request, ticketRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    return json(await issueTicket(ctx.deps, { subscriber, channels: body.channels }), 201);
  });

  router.get('/v0/projects/:id/realtime/subscribe', async (request, ctx) => {
    const url = new URL(request.url);
    refuseUrlCredentials(url);
    let subscriber: Subscriber;
    let channels: string[];
    if (url.searchParams.has('ticket')) {
      // A browser's subscription: the ticket is the credential; the query is checked before it is
      // redeemed, so a malformed request does not use it up.
      if (request.headers.has('authorization')) throw errors.invalid('ticket: give either a ticket or an Authorization header, not both');
      const query = queryOf(url, subscribeQuerySchema, { repeatable: ['channel'] });
      await noBody(request);
      channels = query.channel;
      subscriber = await redeemSubscriberTicket(ctx.deps, { ticket: query.ticket ?? '', projectIdParam: request.params.id, channels });
    } else {
      subscriber = await authorizeSubscriber(ctx.deps, { token: parseBearer(request.headers), projectIdParam: request.params.id });
      channels = queryOf(url, subscribeQuerySchema, { repeatable: ['channel'] }).channel;
      await noBody(request);
    }
    const events = await subscribe(ctx.deps, { requestId: ctx.requestId, subscriber, channels, signal: request.signal });
    return new Response(events, { status: 200, headers: { ...SSE_HEADERS } });
  });
}
