/**
 * Who may subscribe to and publish on a project's realtime channels (contract "POST
 * /v0/projects/{id}/realtime/publish", "Events"; docs/realtime.md): the rules, judged once for both
 * places that serve the public routes — the handlers (handlers/domain/realtime.ts) and the host
 * agent at the local stack's origin (host-agent/realtime/public.ts). Web-standard only.
 *
 * - subscribe: a long-lived credential in the URL is 400; a ticket (in the URL, never beside an
 *   `Authorization` header) is redeemed once in DynamoDB and dies with the key it was issued to;
 *   otherwise the owner's session — its signature, then whether it still stands and owns the
 *   project, in one strongly consistent read (shared/sessions.ts) — or a project key of this very
 *   project (another project's is 403);
 * - publish: the owner's session only.
 *
 * What differs between the two places is passed in (`RealtimeAccess`): how a project key is verified
 * (a DynamoDB read, or the agent's key cache, which a revocation reaches before `DELETE` answers),
 * and, for the agent, a check that it hosts the project before anything is used up (`here`).
 */
import { parseProjectKey, readSessionToken } from '../auth.ts';
import type { Db } from '../db/client.ts';
import { getProject, type ProjectRecord } from '../db/projects.ts';
import { redeemTicket } from '../db/realtime-tickets.ts';
import { errors } from '../errors.ts';
import { pathParam, queryOf } from '../http/body.ts';
import { refuseUrlCredentials, subscriptionChannels, ticketRefusal } from './events.ts';
import { projectIdSchema } from '../schemas/projects.ts';
import { subscribeQuerySchema, TICKET_PATTERN } from '../schemas/realtime.ts';
import { ownedProjectWith, sessionClaims } from '../sessions.ts';

/** Who may subscribe to a project's events: its project, and the key used (null: the owner's session). */
export interface Subscriber {
  project: ProjectRecord;
  keyId: string | null;
}

/** What judging realtime access needs of the place that serves it. */
export interface RealtimeAccess {
  db: Db;
  sessionSecret: string;
  now(): number;
  /** Verifies a project key (401 when unknown, wrong or revoked): its project, its id and, where known, the agent that hosts it. */
  verifyKey(token: string): Promise<{ projectId: string; keyId: string; owner?: string }>;
  /** Whether `keyId` is still an active key of `projectId` (a ticket issued to it dies with it). */
  keyActive(keyId: string, projectId: string): Promise<boolean>;
  /**
   * Told which agent hosts the project (null: no such project) before anything is used up: the
   * agent's origin throws there for a project it does not host, and the request goes to the
   * handlers untouched. Unset for the handlers.
   */
  here?(owner: string | null): void;
}

/**
 * Who subscribes with `token` to the project named by the raw path parameter: the owner session, or
 * a project key of this very project. The credential is judged before the id, so an anonymous caller
 * learns nothing; a key of another project is 403 `authorization_denied`, a revoked key 401.
 */
export async function authorizeSubscriber(a: RealtimeAccess, input: { token: string; projectIdParam: string | undefined }): Promise<Subscriber> {
  if (!parseProjectKey(input.token)) {
    const claims = await readSessionToken(a.sessionSecret, input.token);
    const projectId = pathParam(input.projectIdParam, 'id', projectIdSchema);
    // A signed-out session, or one from before a rotation, is 401 like on every route (docs/api.md "Sessions").
    const { project } = await ownedProjectWith(a.db, claims, projectId);
    a.here?.(project.agent_id);
    return { project, keyId: null };
  }
  const key = await a.verifyKey(input.token);
  const projectId = pathParam(input.projectIdParam, 'id', projectIdSchema);
  if (key.projectId !== projectId) throw errors.denied('the project key belongs to another project');
  if (key.owner !== undefined) a.here?.(key.owner);
  const project = await getProject(a.db, projectId);
  if (!project) throw errors.notFound(`project ${projectId} not found`);
  return { project, keyId: key.keyId };
}

/** SHA-256 of a ticket, hex: what the table keeps (shared/db/realtime-tickets.ts). */
export async function ticketHash(ticket: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(ticket)));
  let out = '';
  for (const b of digest) out += b.toString(16).padStart(2, '0');
  return out;
}

/**
 * The subscriber a ticket stands for, redeeming it (once: a conditional delete, so of two uses
 * anywhere exactly one succeeds). A malformed, unknown, used or expired ticket is 401; one of another
 * project, or that does not grant every asked channel, is 403 and stays unused. A ticket issued to a
 * key that has been revoked since is 401.
 */
export async function redeemSubscriberTicket(a: RealtimeAccess, input: { ticket: string; projectIdParam: string | undefined; channels: string[] }): Promise<Subscriber> {
  if (!TICKET_PATTERN.test(input.ticket)) throw errors.unauthenticated('ticket: is not a realtime ticket (rtt_<64 hex>)');
  const projectId = pathParam(input.projectIdParam, 'id', projectIdSchema);
  const channels = subscriptionChannels(input.channels);
  // Where the place that serves it must know the project first, it is read before the ticket is used up.
  let project: ProjectRecord | null | undefined;
  if (a.here) {
    project = await getProject(a.db, projectId);
    a.here(project?.agent_id ?? null);
  }
  const taken = await redeemTicket(a.db, await ticketHash(input.ticket), { project: projectId, channels, now: a.now() });
  if ('refused' in taken) throw ticketRefusal(taken.refused);
  const { key_id: keyId } = taken.ticket;
  if (keyId !== null && !(await a.keyActive(keyId, projectId))) throw errors.unauthenticated('ticket: the project key it was issued to is revoked');
  project ??= await getProject(a.db, projectId);
  if (!project) throw errors.notFound(`project ${projectId} not found`);
  return { project, keyId };
}

/**
 * A subscribe request in the public route's order: no credential in the URL; then either a ticket
 * (never beside an `Authorization` header; the query checked before the ticket is used up) or the
 * `Authorization` credential, judged before the query; no body (`refuseBody`).
 */
export async function admitSubscriber(
  a: RealtimeAccess,
  input: { url: URL; projectIdParam: string | undefined; hasAuthorization: boolean; token: () => string; refuseBody: () => void | Promise<void> },
): Promise<{ subscriber: Subscriber; channels: string[] }> {
  refuseUrlCredentials(input.url);
  if (input.url.searchParams.has('ticket')) {
    if (input.hasAuthorization) throw errors.invalid('ticket: give either a ticket or an Authorization header, not both');
    const query = queryOf(input.url, subscribeQuerySchema, { repeatable: ['channel'] });
    await input.refuseBody();
    const subscriber = await redeemSubscriberTicket(a, { ticket: query.ticket ?? '', projectIdParam: input.projectIdParam, channels: query.channel });
    return { subscriber, channels: query.channel };
  }
  const subscriber = await authorizeSubscriber(a, { token: input.token(), projectIdParam: input.projectIdParam });
  const channels = queryOf(input.url, subscribeQuerySchema, { repeatable: ['channel'] }).channel;
  await input.refuseBody();
  return { subscriber, channels };
}

/** Who publishes: the owner's session only (a project key is 401), then the project it owns (404 otherwise). */
export async function authorizePublisher(a: RealtimeAccess, input: { token: string; projectIdParam: string | undefined }): Promise<ProjectRecord> {
  const claims = await sessionClaims(a.sessionSecret, input.token);
  const projectId = pathParam(input.projectIdParam, 'id', projectIdSchema);
  const { project } = await ownedProjectWith(a.db, claims, projectId);
  a.here?.(project.agent_id);
  return project;
}
