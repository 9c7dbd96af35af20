/**
 * Routes: realtime (contract "POST /v0/projects/{id}/realtime/publish", "Events"; docs/realtime.md;
 * declared in shared/api/realtime.ts).
 * - publish: owner session only; the hub in the project's host agent assigns `id` and `ts`; answers
 *   the event as delivered, byte for byte.
 * - tickets: a single-use ticket for a browser's subscription, for the owner session or a project
 *   key of that project (docs/realtime.md "Browsers: tickets").
 * - subscribe: Server-Sent Events, for the owner session or a project key of that project in
 *   `Authorization`, or a ticket in the URL — never a long-lived credential there. The agent's event
 *   stream is passed through unchanged, never buffered; a client that goes away cancels the body,
 *   which closes the upstream connection.
 */
import { realtime } from '../../shared/api/index.ts';
import { parseBearer } from '../../shared/auth.ts';
import { SSE_HEADERS } from '../../shared/realtime/events.ts';
import { requireOwnedProject } from '../auth.ts';
import type { Ctx } from '../context.ts';
import { admitSubscriber, authorizeSubscriber, issueTicket, publish, subscribe, type Subscriber } from '../domain/realtime.ts';
import { json } from '../http.ts';
import { implement, type Inputs, type Routed } from '../implement.ts';

/** The owner session or a project key of the project (handlers/domain/realtime.ts). */
const subscriber = (request: Routed, ctx: Ctx) => authorizeSubscriber(ctx.deps, { token: parseBearer(request.headers), projectIdParam: request.params.id });

/**
 * Who subscribes, judged in the public route's one order (shared/realtime/access.ts
 * `admitSubscriber`, which the agent serving the origin follows too): no credential in the URL;
 * a ticket in the query (a browser), checked with the query before it is redeemed, never beside an
 * `Authorization` header; else the `Authorization` header's.
 */
async function subscribeCaller(request: Routed, ctx: Ctx, inputs: Inputs<typeof realtime.subscribe>): Promise<Subscriber> {
  const { subscriber } = await admitSubscriber(ctx.deps, {
    url: inputs.url,
    projectIdParam: request.params.id,
    hasAuthorization: request.headers.has('authorization'),
    token: () => parseBearer(request.headers),
    refuseBody: async () => void (await inputs.body()),
  });
  return subscriber;
}

export const implementations = [
  implement(realtime.publish, requireOwnedProject, async ({ caller, body }, ctx) => {
    const delivered = await publish(ctx.deps, { requestId: ctx.requestId, project: caller.project, channel: body.channel, event: body.event, payload: body.payload });
    return new Response(delivered, { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' } });
  }),

  implement(realtime.ticket, subscriber, async ({ caller, body }, ctx) => json(await issueTicket(ctx.deps, { subscriber: caller, channels: body.channels }), 201)),

  implement(realtime.subscribe, subscribeCaller, async ({ caller, query, request }, ctx) => {
    const events = await subscribe(ctx.deps, { requestId: ctx.requestId, subscriber: caller, channels: query.channel, signal: request.signal });
    return new Response(events, { status: 200, headers: { ...SSE_HEADERS } });
  }),
];
