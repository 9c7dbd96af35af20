/**
 * One `/v2` request, in its phases (contract "DELETE /v2/{path}", "Authentication" 2–4,
 * "Versioning" 2; docs/dataplane.md):
 *
 * 1. `admit`: exactly one `Authorization: Bearer <project key>` (missing, duplicated, malformed, a
 *    session token, unknown, wrong secret, revoked: 401); `X-Svc-Project`, when present, must name
 *    the key's project (else 403); a declared body over `SVCD_DATAPLANE_MAX_BYTES` is 413;
 * 2. `destination`: the project's engine on this agent (else 409 `tenant_not_running`, never woken),
 *    or, with several agents, the agent that owns the project (one hop, never a second);
 * 3. `requestBody`: after `100 Continue` if asked, a small body whole, a larger one streamed, one of
 *    unknown length counted and cut off at the limit;
 * 4. `toPeer` / `toEngine`: streamed there and the answer streamed back unchanged; an engine gone
 *    before answering is 502 `upstream_unavailable`, or 409 `tenant_not_running` when it never took
 *    the request in and its process is gone.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseProjectKey } from '../../shared/auth.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import { failureCode, neverConnected } from '../../shared/http/failures.ts';
import { forward, UpstreamError } from '../../shared/http/forward.ts';
import type { KeyCache } from './key-cache.ts';
import type { Peer, Peers } from './peers.ts';
import { arrived, bearerOf, bodyOf, FORWARDED_BY, PROJECT_REF, SMALL_BODY, type Scanned } from './request.ts';
import type { EngineEndpoint, Upstreams } from './upstreams.ts';

/** What the listener needs to know about engines: where a project's engine runs, from memory. */
export interface EngineEndpoints {
  liveEndpoint(projectId: string): EngineEndpoint | null;
  /**
   * Asked only after the engine at `endpoint` refused or reset a connection: is it gone (409)
   * rather than alive and not answering (502)? host-agent/tenants/engine.ts `engineGone`.
   */
  engineGone?(projectId: string, endpoint: EngineEndpoint): Promise<boolean>;
  /** Marks each request to an engine here as it begins and ends: traffic keeps a tenant awake (host-agent/tenants/idle.ts). */
  readonly activity?: { touch(projectId: string): () => void };
}

/** What serving `/v2` needs of the agent. */
export interface V2Context {
  endpoints: EngineEndpoints;
  keys: KeyCache;
  maxBytes: number;
  upstreams: Upstreams;
  log: (line: string) => void;
  agentId?: string;
  peers?: Peers;
}

/**
 * Failures after which the engine cannot have taken the whole request in, beyond a connection never
 * made: a connection reset, which the kernel does when a socket closes with bytes its process never
 * read (a request sent on a kept-alive connection of an engine that had died, or sitting in its
 * accept queue). Only these are judged by the engine's liveness; a connection closed after the
 * engine read the request is 502 whatever happened to the engine, since it may have been applied.
 */
const RESET = new Set(['ECONNRESET', 'EPIPE']);

/**
 * Methods whose request a client may repeat after a connection closed before any answer (RFC 9110
 * §9.2.2): for these, "closed with no answer" by an engine that is gone equals "not running" — a
 * request written onto a kept-alive connection whose engine had just died (its close not yet read)
 * ends that way. Any other method's request may have been applied, so it stays 502.
 */
const RETRY_SAFE = new Set(['GET', 'HEAD', 'OPTIONS', 'DELETE', 'PUT']);

/** True when the engine never took the request in (see RESET and RETRY_SAFE). */
function notTakenIn(err: UpstreamError, method: string): boolean {
  const code = failureCode(err);
  return neverConnected(err) || RESET.has(code ?? '') || (code === 'UND_ERR_SOCKET' && RETRY_SAFE.has(method));
}

/** Phase 1: the key's project, once the credential, `X-Svc-Project` and the declared size pass. */
async function admit(c: V2Context, h: Scanned, seen: { projectId?: string }): Promise<{ projectId: string; owner: string | undefined }> {
  const presented = parseProjectKey(bearerOf(h.authorization));
  if (!presented) throw errors.unauthenticated('/v2 takes a project key (svc1_<key_id>_<secret>); a session token is not accepted');
  const { projectId, owner } = c.keys.verifyWarm(presented) ?? (await c.keys.verify(presented));
  seen.projectId = projectId;
  if (h.projectRefs.length > 0) {
    const m = h.projectRefs.length === 1 ? PROJECT_REF.exec(h.projectRefs[0]!) : null;
    if (!m || `prj_${m[1]}` !== projectId) {
      throw errors.denied('X-Svc-Project does not name the project of this key (expected prj_<16 hex> or the bare 16 hex)');
    }
  }
  if (h.contentLength !== undefined && Number(h.contentLength) > c.maxBytes) {
    throw errors.tooLarge(`request body exceeds ${c.maxBytes} bytes (SVCD_DATAPLANE_MAX_BYTES)`);
  }
  return { projectId, owner };
}

/**
 * Phase 2: the engine here, or (several agents) the agent that owns the project. When the agent the
 * placement names cannot be reached, the placement is read again once: the project may have moved
 * (docs/durability.md "Relocation"), and the request goes where it is now. (A placement naming this
 * agent is never stale: an agent forgets the placement of a project that leaves it, and starts with none.)
 */
async function destination(c: V2Context, h: Scanned, projectId: string, owner: string | undefined): Promise<{ engine: EngineEndpoint } | { peer: Peer }> {
  try {
    return await destinationOf(c, h, projectId, owner);
  } catch (err) {
    const now = owner === undefined || owner === c.agentId ? undefined : await c.keys.refreshPlacement(projectId);
    if (now === undefined || now === null || now === owner) throw err;
    return destinationOf(c, h, projectId, now);
  }
}

async function destinationOf(c: V2Context, h: Scanned, projectId: string, owner: string | undefined): Promise<{ engine: EngineEndpoint } | { peer: Peer }> {
  if (owner === undefined || owner === c.agentId) {
    const endpoint = c.endpoints.liveEndpoint(projectId);
    if (!endpoint) throw new ServiceError('tenant_not_running', `project ${projectId} has no running engine: call POST /v0/projects/${projectId}/wakeup`);
    return { engine: endpoint };
  }
  // Forwarded here by an agent that believes this one owns the project: never on to a third agent
  // (no loops). When this agent places it on the forwarder itself, the forwarder's placement is the
  // stale one (from before a move): it is told so, and the request goes back to it once, to be served there.
  const back = h.forwardedBy.length === 1 && h.forwardedBy[0] === owner;
  if ((h.forwardedBy.length > 0 && !back) || !c.peers) {
    throw errors.orchestrator(`project ${projectId} is hosted by another host agent; a forwarded request is not forwarded again`);
  }
  if (back) await c.peers.tellMoved(owner, projectId);
  const peer = await c.peers.resolve(owner);
  if ('reason' in peer) {
    throw errors.orchestrator(
      peer.reason === 'stale'
        ? `the host agent of project ${projectId} is not answering (last heartbeat ${peer.heartbeatAt})`
        : `the host agent of project ${projectId} is not registered`,
    );
  }
  return { peer };
}

/** Phase 3: the body as undici sends it; undefined when the client went away before sending it. */
async function requestBody(c: V2Context, req: IncomingMessage, h: Scanned): Promise<Buffer | AsyncGenerator<Buffer> | null | undefined> {
  if (h.chunked) return bodyOf(req, c.maxBytes);
  const declared = h.contentLength;
  if (declared === undefined || declared === '0') return null;
  // Content-Length is enforced by node's parser (never more bytes than declared). A small body (the
  // usual SQL request) is taken whole once it has arrived: it is already in node's request buffer,
  // and one write upstream is much cheaper than stream machinery per request.
  if (Number(declared) <= SMALL_BODY) return arrived(req);
  return bodyOf(req, null);
}

/** Phase 4a: to the owner, which authenticates the key again and judges revocation; its answer comes back unchanged. */
async function toPeer(c: V2Context, req: IncomingMessage, res: ServerResponse, h: Scanned, peer: Peer, body: Buffer | AsyncGenerator<Buffer> | null, ids: { requestId: string; projectId: string }): Promise<void> {
  try {
    await forward(peer.pool, req, res, {
      method: req.method ?? 'GET',
      path: req.url ?? '',
      // Every agent the request has passed goes on with it, so a forward never returns to one of them.
      headers: [...h.forwarded, 'authorization', h.authorization[0]!, ...h.forwardedBy.flatMap((id) => [FORWARDED_BY, id]), FORWARDED_BY, c.agentId ?? ''],
      body,
    });
  } catch (err) {
    if (!(err instanceof UpstreamError)) throw err;
    if (err.cause instanceof ServiceError) throw err.cause;
    if (res.destroyed) return;
    c.peers!.suspect(peer.agentId);
    c.log(`dataplane: request ${ids.requestId} forwarded to agent ${peer.agentId} (${peer.dataplaneUrl}) for ${ids.projectId} failed: ${err.message}`);
    throw errors.orchestrator(`the host agent of project ${ids.projectId} did not answer`);
  }
}

/** Phase 4b: to the project's engine. */
async function toEngine(c: V2Context, req: IncomingMessage, res: ServerResponse, h: Scanned, engine: EngineEndpoint, body: Buffer | AsyncGenerator<Buffer> | null, ids: { requestId: string; projectId: string }): Promise<void> {
  const { requestId, projectId } = ids;
  const method = req.method ?? 'GET';
  try {
    await forward(c.upstreams.for(projectId, engine), req, res, { method, path: req.url ?? '', headers: h.forwarded, body, extraResponseHeaders: ['x-request-id', requestId] });
  } catch (err) {
    if (!(err instanceof UpstreamError)) throw err;
    if (err.cause instanceof ServiceError) throw err.cause;
    if (res.destroyed) return; // the client went away: nobody to answer
    // An engine killed behind the agent's back refuses connections before its exit is noticed
    // (docs/dataplane.md): the tenant is not running, which is 409, not an upstream fault.
    if (notTakenIn(err, method) && (await c.endpoints.engineGone?.(projectId, engine))) {
      throw new ServiceError('tenant_not_running', `project ${projectId} has no running engine (it exited): call POST /v0/projects/${projectId}/wakeup`);
    }
    c.log(`dataplane: request ${requestId} to the engine of ${projectId} failed: ${err.message}`);
    throw errors.upstream(`the engine of project ${projectId} did not answer`);
  }
}

/** Serves one `/v2` request whose headers are `h`; `seen` learns its project once its key is verified. */
export async function serveV2(c: V2Context, req: IncomingMessage, res: ServerResponse, h: Scanned, requestId: string, expectsContinue: boolean, seen: { projectId?: string }): Promise<void> {
  const { projectId, owner } = await admit(c, h, seen);
  const target = await destination(c, h, projectId, owner);
  // In flight until answered: no automatic sleep meanwhile (docs/lifecycle.md "Automatic sleep and backups").
  const done = 'engine' in target ? c.endpoints.activity?.touch(projectId) : undefined;
  try {
    // A client that asked `Expect: 100-continue` sends its body only now that every check passed; a refused one never sends it.
    if (expectsContinue) res.writeContinue();
    const body = await requestBody(c, req, h);
    if (body === undefined) return; // the client went away before sending its body
    if ('peer' in target) return await toPeer(c, req, res, h, target.peer, body, { requestId, projectId });
    return await toEngine(c, req, res, h, target.engine, body, { requestId, projectId });
  } finally {
    done?.();
  }
}
