/**
 * Realtime subscribe and publish served by the agent itself at the local stack's origin
 * (docs/realtime.md "Through the base URL, locally"; docs/local-stack.md "One origin"): an event
 * stream then runs from the hub straight to the client's socket, and a publish costs one hop,
 * instead of each crossing workerd to the agent's internal routes.
 *
 * The rules are the public routes', judged by the one implementation the handlers use too
 * (shared/realtime/access.ts), with this agent's key cache for project keys (which the revocation
 * of a key reaches before `DELETE` answers; a stream opened with a key ends when it is revoked);
 * a publish's body is `publishRequestSchema`, at most `SVCD_JSON_MAX_BYTES`, its payload at most
 * 32 KiB (shared/realtime/events.ts), then the hub.
 *
 * A request for a project placed on another agent, or one this agent cannot judge without using
 * something up (a ticket of a project it does not know), is relayed to the handlers untouched,
 * which serve it as before.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bearerToken, parseProjectKey } from '../../shared/auth.ts';
import { errors } from '../../shared/errors.ts';
import { readJson } from '../../shared/http/body.ts';
import { corsAnswerHeaders, type CorsPolicy } from '../../shared/http/cors.ts';
import { answerError, toWebRequest } from '../../shared/http/node-http.ts';
import { newRequestId } from '../../shared/ids.ts';
import type { Log } from '../../shared/log.ts';
import { SSE_HEADERS, subscriptionChannels } from '../../shared/realtime/events.ts';
import { admitSubscriber, authorizePublisher, type RealtimeAccess } from '../../shared/realtime/access.ts';
import { publishRequestSchema } from '../../shared/schemas/realtime.ts';
import { realtime as realtimeRoutes } from '../../shared/api/index.ts';
import type { AgentContext } from '../context.ts';
import { logPublicRequest, type PublicRoute } from '../dataplane/origin.ts';
import type { KeyCache } from '../dataplane/key-cache.ts';
import { responseSink } from '../routes/realtime.ts';

/** What the public realtime routes need of the agent. */
export interface PublicRealtimeDeps {
  ctx: Pick<AgentContext, 'settings' | 'db' | 'agentId' | 'realtime' | 'now'>;
  keys: KeyCache;
  cors: CorsPolicy;
  log: Log;
}

/** Why a request is relayed to the handlers: the project is not this agent's to serve. */
class NotHere extends Error {}

/** The realtime access rules on this agent: keys from its cache, and only projects it hosts. */
function accessOf(deps: PublicRealtimeDeps): RealtimeAccess {
  const { ctx, keys } = deps;
  return {
    db: ctx.db,
    sessionSecret: ctx.settings.SVCD_SESSION_SECRET,
    now: ctx.now,
    verifyKey: async (token) => {
      const presented = parseProjectKey(token);
      if (!presented) throw errors.unauthenticated('a project key (svc1_<key_id>_<secret>) is required');
      return keys.verifyWarm(presented) ?? (await keys.verify(presented));
    },
    keyActive: (keyId, projectId) => keys.isActive(keyId, projectId),
    here: (owner) => {
      if (owner !== ctx.agentId) throw new NotHere();
    },
  };
}

/**
 * The public realtime routes: answers false for any other request; otherwise serves it, or calls
 * `elsewhere` (the handlers) when the project is not this agent's.
 */
export function publicRealtime(deps: PublicRealtimeDeps): PublicRoute {
  const { log } = deps;
  const access = accessOf(deps);
  return (req, res, match, expectsContinue, elsewhere) => {
    const route = match.route === realtimeRoutes.subscribe ? 'subscribe' : match.route === realtimeRoutes.publish ? 'publish' : null;
    const rawId = match.params.id;
    if (route === null || rawId === undefined) return false;
    const requestId = newRequestId();
    const seen: { projectId?: string } = {};
    for (const [name, value] of Object.entries(corsAnswerHeaders(deps.cors, req.headers.origin))) res.setHeader(name, value);
    res.setHeader('x-request-id', requestId);
    logPublicRequest(log, req, res, requestId, match.route.path, seen);
    const served = route === 'subscribe' ? subscribe(deps, access, req, res, rawId, seen) : publish(deps, access, req, res, rawId, expectsContinue, seen);
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

async function subscribe(deps: PublicRealtimeDeps, access: RealtimeAccess, req: IncomingMessage, res: ServerResponse, rawId: string, seen: { projectId?: string }): Promise<void> {
  const { ctx } = deps;
  const { subscriber, channels } = await admitSubscriber(access, {
    url: new URL(req.url ?? '/', 'http://agent.internal'),
    projectIdParam: rawId,
    hasAuthorization: req.headers.authorization !== undefined,
    token: () => bearerToken(authorizationOf(req)),
    refuseBody: () => refuseBody(req),
  });
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
  access: RealtimeAccess,
  req: IncomingMessage,
  res: ServerResponse,
  rawId: string,
  expectsContinue: boolean,
  seen: { projectId?: string },
): Promise<void> {
  const { ctx } = deps;
  const project = await authorizePublisher(access, { token: bearerToken(authorizationOf(req)), projectIdParam: rawId });
  seen.projectId = project.id;
  // The body is read only now: a request relayed to the handlers has it untouched.
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
