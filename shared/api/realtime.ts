/** Declarations: realtime (contract "POST /v0/projects/{id}/realtime/publish", "Events"; docs/realtime.md). */
import { publishRequestSchema, realtimeEventSchema, realtimeTicketSchema, subscribeQuerySchema, ticketRequestSchema } from '../schemas/realtime.ts';
import { project } from './projects.ts';
import { route } from './route.ts';

export const publish = route({
  method: 'POST',
  path: '/v0/projects/:id/realtime/publish',
  tag: 'realtime',
  summary: 'Publish an event',
  description: 'Owner session only; `system` is reserved. The payload is at most 32 KiB as JSON.',
  access: 'session',
  params: project,
  body: { flow: 'json', schema: publishRequestSchema },
  answers: { 200: { description: 'the event as delivered', json: realtimeEventSchema } },
  errors: [503],
});

export const ticket = route({
  method: 'POST',
  path: '/v0/projects/:id/realtime/tickets',
  tag: 'realtime',
  summary: 'Issue a single-use subscription ticket (browsers)',
  description:
    'The owner session or a project key of the project. The ticket opens one subscription to (a subset of) its channels, ' +
    'within 60 s, as `?ticket=` on subscribe: browsers\' EventSource cannot send Authorization, and no long-lived ' +
    'credential is accepted in a URL (docs/realtime.md "Browsers: tickets").',
  access: 'session-or-key',
  params: project,
  body: { flow: 'json', schema: ticketRequestSchema },
  answers: { 201: { description: 'the ticket and the subscribe URL that uses it', json: realtimeTicketSchema } },
  errors: [403],
});

export const subscribe = route({
  method: 'GET',
  path: '/v0/projects/:id/realtime/subscribe',
  tag: 'realtime',
  summary: 'Subscribe to channels (Server-Sent Events)',
  description:
    'The owner session or a project key of the project in `Authorization`, or a single-use `ticket` from POST realtime/tickets (browsers; a long-lived credential in the URL is 400). ' +
    '403 for a key of another project, or a ticket of another project or that does not grant every channel asked; 409 `conflict` while the project has as many subscribers as it may. ' +
    '`id:` the event id, `event:` its name, `data:` the event as delivered; a comment heartbeat; a subscriber that falls behind gets `event: overflow` and is closed (docs/realtime.md).',
  access: 'session-or-key',
  params: project,
  query: subscribeQuerySchema,
  repeatable: ['channel'],
  answers: { 200: { description: 'the event stream', content: { type: 'text/event-stream', description: 'Server-Sent Events' } } },
  answerFlow: 'events',
  errors: [403, 409, 503],
});

/** In the order they are matched. */
export const routes = [publish, ticket, subscribe] as const;
