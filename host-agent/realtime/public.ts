/**
 * Realtime subscribe and publish served by the agent itself, on connections the local front hands
 * over (docs/realtime.md "Through the base URL, locally"; docs/local-stack.md "One hop for `/v2`"):
 * an event stream then runs from the hub straight to the client's socket, and a publish costs one
 * hop, instead of each crossing the front and workerd to the agent's internal routes.
 *
 * The rules are the public routes' (handlers/routes/realtime.ts), judged with the same shared
 * pieces, in the same order and with the same answers:
 *
 * - subscribe: long-lived credentials in the URL are 400; a ticket (in the URL, never beside an
 *   `Authorization` header) is redeemed once in DynamoDB and dies with the key it was issued to;
 *   otherwise the owner's session — its signature, then whether it still stands and owns the
 *   project, in one strongly consistent read — or a project key of this very project (this
 *   agent's key cache, which the revocation of a key reaches before `DELETE` answers; a stream
 *   opened with a key ends when it is revoked);
 * - publish: the owner's session only, then the body (`publishRequestSchema`, at most
 *   `SVCD_JSON_MAX_BYTES`, payload at most 32 KiB), then the hub.
 *
 * A request for a project placed on another agent, or one this agent cannot judge without using
 * something up (a ticket of a project it does not know), goes back to the front untouched, whose
 * handlers serve it as before.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bearerToken, parseProjectKey, readSessionToken, type SessionClaims } from '../../shared/auth.ts';
import { sessionKeys, standingAccountIn } from '../../shared/db/accounts.ts';
import { batchGetItems } from '../../shared/db/client.ts';
import { getProject, toRecord, type ProjectRecord } from '../../shared/db/projects.ts';
import { redeemTicket } from '../../shared/db/realtime-tickets.ts';
import { keys as tableKeys } from '../../shared/db/table.ts';
import { errors } from '../../shared/errors.ts';
import { pathParam, queryOf, readJson } from '../../shared/http/body.ts';
import { corsAnswerHeaders, type CorsPolicy } from '../../shared/http/cors.ts';
import { answerError, toWebRequest } from '../../shared/http/node-http.ts';
import { newRequestId } from '../../shared/ids.ts';
import type { Log } from '../../shared/log.ts';
import { refuseUrlCredentials, SSE_HEADERS, subscriptionChannels, ticketRefusal } from '../../shared/realtime.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import { publishRequestSchema, subscribeQuerySchema, TICKET_PATTERN } from '../../shared/schemas/realtime.ts';
import type { AgentContext } from '../context.ts';
import { logPublicRequest, type PublicRoute } from '../dataplane/origin.ts';
import type { KeyCache } from '../dataplane/key-cache.ts';
import { responseSink } from '../routes/realtime.ts';

const ROUTE = /^\/v0\/projects\/([^/?]+)\/realtime\/(subscribe|publish)(?:\?|$)/;

/** What the public realtime routes need of the agent. */
export interface PublicRealtimeDeps {
  ctx: Pick<AgentContext, 'settings' | 'db' | 'agentId' | 'realtime' | 'now'>;
  keys: KeyCache;
  cors: CorsPolicy;
  log: Log;
}

/** Why a request goes back to the front: the project is not this agent's to serve. */
class NotHere extends Error {}

/**
 * The public realtime routes: answers false for any other request; otherwise serves it, or calls
 * `elsewhere` (the front) when the project is not this agent's.
 */
export function publicRealtime(deps: PublicRealtimeDeps): PublicRoute {
  const { ctx, log } = deps;
  return (req, res, expectsContinue, elsewhere) => {
    const m = ROUTE.exec(req.url ?? '');
    const route = m?.[2];
    if (!m || !((route === 'subscribe' && req.method === 'GET') || (route === 'publish' && req.method === 'POST'))) return false;
    const requestId = newRequestId();
    const seen: { projectId?: string } = {};
    for (const [name, value] of Object.entries(corsAnswerHeaders(deps.cors, req.headers.origin))) res.setHeader(name, value);
    res.setHeader('x-request-id', requestId);
    logPublicRequest(log, req, res, requestId, `/v0/projects/:id/realtime/${route}`, seen);
    const served = route === 'subscribe' ? subscribe(deps, req, res, m[1]!, seen) : publish(deps, req, res, m[1]!, expectsContinue, seen);
    served.catch((thrown: unknown) => {
      if (thrown instanceof NotHere) {
        res.removeHeader('x-request-id');
        return elsewhere();
      }
      answerError(req, res, thrown, requestId, (line) => log(`agent: realtime ${requestId}: ${line}`));
    });
    return true;
  };
}

/** Who opens a stream: the project, and the key used (null: the owner's session or a ticket of it). */
interface Subscriber {
  project: ProjectRecord;
  keyId: string | null;
}

async function subscribe(deps: PublicRealtimeDeps, req: IncomingMessage, res: ServerResponse, rawId: string, seen: { projectId?: string }): Promise<void> {
  const { ctx } = deps;
  const url = new URL(req.url ?? '/', 'http://agent.internal');
  refuseUrlCredentials(url);
  let subscriber: Subscriber;
  let channels: string[];
  if (url.searchParams.has('ticket')) {
    // The query is judged before the ticket is redeemed, so a malformed request does not use it up.
    if (req.headers.authorization !== undefined) throw errors.invalid('ticket: give either a ticket or an Authorization header, not both');
    const query = queryOf(url, subscribeQuerySchema, { repeatable: ['channel'] });
    refuseBody(req);
    channels = query.channel;
    subscriber = await redeem(deps, query.ticket ?? '', rawId, channels);
  } else {
    subscriber = await authorize(deps, bearerToken(authorizationOf(req)), rawId);
    channels = queryOf(url, subscribeQuerySchema, { repeatable: ['channel'] }).channel;
    refuseBody(req);
  }
  subscriptionChannels(channels);
  const { project, keyId } = subscriber;
  seen.projectId = project.id;
  if (res.destroyed || req.socket.destroyed) return;
  // The head, the opening comment and the registration happen in one tick, after the capacity check
  // (as the internal route does: host-agent/routes/realtime.ts).
  ctx.realtime.admit(project.id);
  req.socket.setNoDelay(true);
  res.writeHead(200, SSE_HEADERS);
  res.flushHeaders();
  const sink = responseSink(res, req.socket);
  sink.write(ctx.realtime.comment('subscribed'));
  ctx.realtime.subscribe(project.id, channels, sink, keyId);
}

async function publish(
  deps: PublicRealtimeDeps,
  req: IncomingMessage,
  res: ServerResponse,
  rawId: string,
  expectsContinue: boolean,
  seen: { projectId?: string },
): Promise<void> {
  const { ctx } = deps;
  const token = bearerToken(authorizationOf(req));
  if (parseProjectKey(token)) throw errors.unauthenticated('a project key is not accepted here: use a session token');
  const claims = await readSessionToken(ctx.settings.SVCD_SESSION_SECRET, token);
  const projectId = pathParam(rawId, 'id', projectIdSchema);
  const project = await ownedProject(deps, claims, projectId);
  seen.projectId = project.id;
  // The body is read only now: a request that goes back to the front has it untouched.
  if (expectsContinue) res.writeContinue();
  const body = await readJson(toWebRequest(req, res, 'http://agent.internal'), publishRequestSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
  const { json } = ctx.realtime.publish(project.id, body.channel, body.event, body.payload);
  const bytes = Buffer.from(json, 'utf8');
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': bytes.byteLength });
  res.end(bytes);
}

/**
 * The one `Authorization` header's value (node keeps only the first of two, so the raw list is
 * read: two are 401 like on every route), or null.
 */
function authorizationOf(req: IncomingMessage): string | null {
  let value: string | null = null;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i]!.toLowerCase() !== 'authorization') continue;
    if (value !== null) throw errors.unauthenticated('the Authorization header must appear exactly once');
    value = req.rawHeaders[i + 1]!;
  }
  return value;
}

/** A GET subscribe takes no body (docs/api.md "Decisions"). */
function refuseBody(req: IncomingMessage): void {
  const declared = req.headers['content-length'];
  if ((declared !== undefined && !/^\s*0+\s*$/.test(declared)) || req.headers['transfer-encoding'] !== undefined) {
    throw errors.invalid('body: this route takes no body');
  }
}

/**
 * The caller's project, with the session's standing, in one strongly consistent read: 401 for a
 * session that has ended, 404 for a project absent or another account's; a project placed on
 * another agent goes back to the front.
 */
async function ownedProject(deps: PublicRealtimeDeps, claims: SessionClaims, projectId: string): Promise<ProjectRecord> {
  const items = await batchGetItems(deps.ctx.db, [...sessionKeys(claims.accountId, claims.sessionId), tableKeys.project(projectId)]);
  if (!standingAccountIn(items, claims)) throw errors.unauthenticated('the session has ended (signed out, or the account secret was rotated): open a new one');
  const item = items.get(tableKeys.project(projectId));
  if (!item || item.owner !== claims.accountId) throw errors.notFound(`project ${projectId} not found`);
  const project = toRecord(item);
  if (project.agent_id !== deps.ctx.agentId) throw new NotHere();
  return project;
}

/**
 * Who subscribes with `token`: the owner's session, or a project key of this very project (403 for
 * another project's, 401 for an unknown or revoked one). The credential is judged before the id.
 */
async function authorize(deps: PublicRealtimeDeps, token: string, rawId: string): Promise<Subscriber> {
  const presented = parseProjectKey(token);
  if (!presented) {
    const claims = await readSessionToken(deps.ctx.settings.SVCD_SESSION_SECRET, token);
    return { project: await ownedProject(deps, claims, pathParam(rawId, 'id', projectIdSchema)), keyId: null };
  }
  const key = deps.keys.verifyWarm(presented) ?? (await deps.keys.verify(presented));
  const projectId = pathParam(rawId, 'id', projectIdSchema);
  if (key.projectId !== projectId) throw errors.denied('the project key belongs to another project');
  if (key.owner !== undefined && key.owner !== deps.ctx.agentId) throw new NotHere();
  const project = await getProject(deps.ctx.db, projectId);
  if (!project) throw errors.notFound(`project ${projectId} not found`);
  return { project, keyId: key.keyId };
}

/**
 * The subscriber a ticket stands for, redeeming it (once, in DynamoDB). The project is read first:
 * a ticket of a project this agent does not host is left unused for the front.
 */
async function redeem(deps: PublicRealtimeDeps, ticket: string, rawId: string, channels: string[]): Promise<Subscriber> {
  const { ctx } = deps;
  if (!TICKET_PATTERN.test(ticket)) throw errors.unauthenticated('ticket: is not a realtime ticket (rtt_<64 hex>)');
  const projectId = pathParam(rawId, 'id', projectIdSchema);
  subscriptionChannels(channels);
  const project = await getProject(ctx.db, projectId);
  if (!project || project.agent_id !== ctx.agentId) throw new NotHere();
  const hash = createHash('sha256').update(ticket).digest('hex');
  const taken = await redeemTicket(ctx.db, hash, { project: projectId, channels, now: ctx.now() });
  if ('refused' in taken) throw ticketRefusal(taken.refused);
  const { key_id: keyId } = taken.ticket;
  // A ticket issued to a key dies with it: this agent's key cache holds its revocation.
  if (keyId !== null && !(await deps.keys.isActive(keyId, projectId))) throw errors.unauthenticated('ticket: the project key it was issued to is revoked');
  return { project, keyId };
}
