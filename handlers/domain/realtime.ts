/**
 * Realtime (contract "POST /v0/projects/{id}/realtime/publish", "Events"; docs/realtime.md): the hub
 * lives in the project's host agent. Publishing is the owner's; subscribing is the owner's or a
 * project key's of that very project. The agent's answers are passed on as streams, never buffered.
 */
import type { ProjectRecord } from '../../shared/db/projects.ts';
import { internalPaths } from '../../shared/internal-paths.ts';
import { verifyProjectKey } from '../../shared/project-keys.ts';
import { payloadJson, subscriptionChannels } from '../../shared/realtime/events.ts';
import * as access from '../../shared/realtime/access.ts';
import { ticketHash, type Subscriber } from '../../shared/realtime/access.ts';
import type { Deps } from '../context.ts';
import { lookupKey } from '../../shared/db/keys.ts';
import { putTicket } from '../../shared/db/realtime-tickets.ts';
import { randomHex } from '../../shared/ids.ts';
import { TICKET_TTL_SECONDS, type RealtimeTicket } from '../../shared/schemas/realtime.ts';
import { nowIso } from '../../shared/time.ts';
import { agentFor } from './placement.ts';

export type { Subscriber } from '../../shared/realtime/access.ts';

/**
 * Publishes an event through the project's agent, which assigns `id` and `ts`; answers the agent's
 * JSON text of the delivered event. A payload over the limit is 413 before any agent is involved.
 */
export async function publish(
  deps: Deps,
  input: { requestId: string; project: ProjectRecord; channel: string; event: string; payload: unknown },
): Promise<ReadableStream<Uint8Array> | null> {
  payloadJson(input.payload);
  const agent = await agentFor(deps, input.project);
  const upstream = await deps.agents.fetch(agent, 'POST', internalPaths.realtimePublish(input.project.id), {
    body: { channel: input.channel, event: input.event, payload: input.payload ?? null },
    requestId: input.requestId,
  });
  return upstream.body;
}

/** The realtime access rules (shared/realtime/access.ts) on the handlers' table: keys verified by one strongly consistent read. */
function accessOf(deps: Deps): access.RealtimeAccess {
  const { db, settings } = deps;
  return {
    db,
    sessionSecret: settings.SVCD_SESSION_SECRET,
    now: deps.now,
    verifyKey: (token) => verifyProjectKey(db, settings.SVCD_KEY_PEPPER, token),
    keyActive: async (keyId, projectId) => {
      const key = await lookupKey(db, keyId);
      return key !== null && key.revoked_at === null && key.project === projectId;
    },
  };
}

/**
 * Who subscribes with `token` to the project named by the raw path parameter: the owner session, or
 * a project key of this very project (shared/realtime/access.ts).
 */
export function authorizeSubscriber(deps: Deps, input: { token: string; projectIdParam: string | undefined }): Promise<Subscriber> {
  return access.authorizeSubscriber(accessOf(deps), input);
}

/** A whole subscribe request in the public route's order (shared/realtime/access.ts `admitSubscriber`). */
export function admitSubscriber(deps: Deps, input: Parameters<typeof access.admitSubscriber>[1]): Promise<{ subscriber: Subscriber; channels: string[] }> {
  return access.admitSubscriber(accessOf(deps), input);
}

/** Opens the agent's event stream for `channels` (at least one, at most 32); ends when `signal` aborts. */
export async function subscribe(
  deps: Deps,
  input: { requestId: string; subscriber: Subscriber; channels: string[]; signal: AbortSignal },
): Promise<ReadableStream<Uint8Array> | null> {
  const { project, keyId } = input.subscriber;
  const query = new URLSearchParams();
  for (const channel of subscriptionChannels(input.channels)) query.append('channel', channel);
  if (keyId) query.set('key_id', keyId);
  const agent = await agentFor(deps, project);
  const upstream = await deps.agents.fetch(agent, 'GET', `${internalPaths.realtimeSubscribe(project.id)}?${query}`, {
    requestId: input.requestId,
    signal: input.signal,
  });
  return upstream.body;
}

/**
 * Issues a single-use ticket for `channels` of the subscriber's project (docs/realtime.md "Browsers:
 * tickets"): 256 random bits, of which the table keeps only the SHA-256; it expires 60 s after
 * issue. A ticket issued to a project key is tied to it: revoking the key refuses the ticket and
 * ends the subscription it opened.
 */
export async function issueTicket(deps: Deps, input: { subscriber: Subscriber; channels: string[] }): Promise<RealtimeTicket> {
  const { project, keyId } = input.subscriber;
  const channels = subscriptionChannels(input.channels);
  const ticket = `rtt_${randomHex(32)}`;
  const now = deps.now();
  const expiresAt = now + TICKET_TTL_SECONDS * 1000;
  await putTicket(deps.db, {
    hash: await ticketHash(ticket),
    project: project.id,
    channels,
    key_id: keyId,
    created_at: nowIso(now),
    expires_at_ms: expiresAt,
  });
  const query = new URLSearchParams();
  for (const channel of channels) query.append('channel', channel);
  query.set('ticket', ticket);
  return {
    ticket,
    project: project.id,
    channels,
    expires_at: nowIso(expiresAt),
    subscribe_url: `/v0/projects/${project.id}/realtime/subscribe?${query}`,
  };
}

