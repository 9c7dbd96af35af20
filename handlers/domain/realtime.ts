/**
 * Realtime (contract "POST /v0/projects/{id}/realtime/publish", "Events"; docs/realtime.md): the hub
 * lives in the project's host agent. Publishing is the owner's; subscribing is the owner's or a
 * project key's of that very project. The agent's answers are passed on as streams, never buffered.
 */
import { parseProjectKey, readSessionToken } from '../../shared/auth.ts';
import { getProject, type ProjectRecord } from '../../shared/db/projects.ts';
import { errors } from '../../shared/errors.ts';
import { pathParam } from '../../shared/http/body.ts';
import { internalPaths } from '../../shared/internal-paths.ts';
import { verifyProjectKey } from '../../shared/project-keys.ts';
import { payloadJson, subscriptionChannels, ticketRefusal } from '../../shared/realtime.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import type { Deps } from '../context.ts';
import { lookupKey } from '../../shared/db/keys.ts';
import { putTicket, redeemTicket } from '../../shared/db/realtime-tickets.ts';
import { randomHex } from '../../shared/ids.ts';
import { TICKET_PATTERN, TICKET_TTL_SECONDS, type RealtimeTicket } from '../../shared/schemas/realtime.ts';
import { nowIso } from '../../shared/time.ts';
import { agentFor } from './placement.ts';
import { ownedProjectOf } from './sessions.ts';

/** Who may subscribe to a project's events: its project, and the key used (null: the owner's session). */
export interface Subscriber {
  project: ProjectRecord;
  keyId: string | null;
}

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

/**
 * Who subscribes with `token` to the project named by the raw path parameter: the owner session, or
 * a project key of this very project. The credential is judged before the id, so an anonymous caller
 * learns nothing; a key of another project is 403 `authorization_denied`, a revoked key 401.
 */
export async function authorizeSubscriber(deps: Deps, input: { token: string; projectIdParam: string | undefined }): Promise<Subscriber> {
  const { db, settings } = deps;
  if (!parseProjectKey(input.token)) {
    const session = await readSessionToken(settings.SVCD_SESSION_SECRET, input.token);
    const projectId = pathParam(input.projectIdParam, 'id', projectIdSchema);
    // A signed-out session, or one from before a rotation, is 401 like on every route (docs/api.md "Sessions").
    return { project: await ownedProjectOf(deps, session, projectId), keyId: null };
  }
  const key = await verifyProjectKey(db, settings.SVCD_KEY_PEPPER, input.token);
  const projectId = pathParam(input.projectIdParam, 'id', projectIdSchema);
  if (key.projectId !== projectId) throw errors.denied('the project key belongs to another project');
  const project = await getProject(db, projectId);
  if (!project) throw errors.notFound(`project ${projectId} not found`);
  return { project, keyId: key.keyId };
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

/**
 * The subscriber a ticket stands for, redeeming it (once: a conditional delete, so of two uses on
 * any handler instances exactly one succeeds). A malformed, unknown, used or expired ticket is 401;
 * one of another project, or that does not grant every asked channel, is 403 and stays unused. A
 * ticket issued to a key that has been revoked since is 401.
 */
export async function redeemSubscriberTicket(
  deps: Deps,
  input: { ticket: string; projectIdParam: string | undefined; channels: string[] },
): Promise<Subscriber> {
  if (!TICKET_PATTERN.test(input.ticket)) throw errors.unauthenticated('ticket: is not a realtime ticket (rtt_<64 hex>)');
  const projectId = pathParam(input.projectIdParam, 'id', projectIdSchema);
  const channels = subscriptionChannels(input.channels);
  const taken = await redeemTicket(deps.db, await ticketHash(input.ticket), { project: projectId, channels, now: deps.now() });
  if ('refused' in taken) throw ticketRefusal(taken.refused);
  const { key_id: keyId } = taken.ticket;
  if (keyId !== null) {
    const key = await lookupKey(deps.db, keyId);
    if (!key || key.revoked_at !== null || key.project !== projectId) throw errors.unauthenticated('ticket: the project key it was issued to is revoked');
  }
  const project = await getProject(deps.db, projectId);
  if (!project) throw errors.notFound(`project ${projectId} not found`);
  return { project, keyId };
}

/** SHA-256 of a ticket, hex: what the table keeps (shared/db/realtime-tickets.ts). */
async function ticketHash(ticket: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(ticket)));
  let out = '';
  for (const b of digest) out += b.toString(16).padStart(2, '0');
  return out;
}
