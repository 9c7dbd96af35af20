/**
 * The `/v2` forwarding listener of a host agent (contract "DELETE /v2/{path}", "Authentication" 2–4,
 * "Versioning" 2; docs/dataplane.md). Every method on `/v2/...`:
 *
 * 1. exactly one `Authorization: Bearer <project key>` (missing, duplicated, malformed, a session
 *    token, unknown, wrong secret, revoked: 401 with `WWW-Authenticate`);
 * 2. `X-Svc-Project`, when present, must name the key's project (`prj_<16 hex>` or the 16 hex): else 403;
 * 3. a declared body over `SVCD_DATAPLANE_MAX_BYTES` is 413 before anything is forwarded; a body of
 *    unknown length is counted as it streams and cut off at the limit (the engine never sees a
 *    complete over-limit request);
 * 4. the project's engine must be running on this agent: else 409 `tenant_not_running` (never woken);
 * 5. the request is streamed to the engine and its answer streamed back unchanged (status, headers
 *    less hop-by-hop ones, body); an engine gone before answering is 502 `upstream_unavailable`,
 *    or 409 `tenant_not_running` when it never took the request in and its process is gone.
 *
 * With several agents, a request for a project another agent owns is forwarded after steps 1–3, in
 * one hop, to that agent's registered `dataplane_url`, key and all, marked `X-Svc-Forwarded-By`
 * (the owner authenticates the key again and judges revocation; a request that already carries
 * the mark is never forwarded again). An owner that is not live is 503 `orchestrator_unavailable`.
 *
 * Errors the service produces carry the error envelope and `X-Request-Id`. A warm request reads
 * nothing from DynamoDB (host-agent/dataplane/key-cache.ts).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { bearerToken, parseProjectKey } from '../../shared/auth.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import { answerClientErrors, answerError, badTarget, listen, SERVER_OPTIONS } from '../../shared/http/node-http.ts';
import { corsAnswerHeaders, isPreflight, NO_CORS, preflightHeaders, type CorsPolicy } from '../../shared/http/cors.ts';
import { forward, UpstreamError } from '../../shared/http/forward.ts';
import { connectionTokens, HOP_BY_HOP, isHopByHop } from '../../shared/http/hop-by-hop.ts';
import { serveConnection } from '../../shared/http/handoff.ts';
import type { KeyCache } from './key-cache.ts';
import type { Peer, Peers } from './peers.ts';
import { Upstreams, type EngineEndpoint } from './upstreams.ts';

/** What the listener needs to know about engines: where a project's engine runs, from memory. */
export interface EngineEndpoints {
  liveEndpoint(projectId: string): EngineEndpoint | null;
  /**
   * Asked only after the engine at `endpoint` refused or reset a connection: is it gone (409)
   * rather than alive and not answering (502)? host-agent/tenants/engine.ts `engineGone`.
   */
  engineGone?(projectId: string, endpoint: EngineEndpoint): Promise<boolean>;
}

/**
 * Failures that mean the engine never took the whole request in, so it cannot have applied it:
 * nothing accepted the connection (refused, connect timeout), or the connection was reset, which
 * the kernel does when a socket closes with bytes its process never read (a request sent on a
 * kept-alive connection of an engine that had died, or sitting in its accept queue). Only these are
 * judged by the engine's liveness; a connection closed after the engine read the request is 502
 * whatever happened to the engine, since the request may have been applied.
 */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'ECONNRESET', 'EPIPE']);

/**
 * Methods whose request a client may repeat after a connection closed before any answer (RFC 9110
 * §9.2.2): for these, "closed with no answer" by an engine that is gone equals "not running" — a
 * request written onto a kept-alive connection whose engine had just died (its close not yet read)
 * ends that way. Any other method's request may have been applied, so it stays 502.
 */
const RETRY_SAFE = new Set(['GET', 'HEAD', 'OPTIONS', 'DELETE', 'PUT']);

function neverConnected(err: UpstreamError, method: string): boolean {
  const code = (err.cause as { code?: unknown } | undefined)?.code;
  if (typeof code !== 'string') return false;
  return NOT_CONNECTED.has(code) || (code === 'UND_ERR_SOCKET' && RETRY_SAFE.has(method));
}

/** Options of the listener. */
export interface DataplaneOptions {
  host: string;
  port: number;
  maxBytes: number;
  endpoints: EngineEndpoints;
  keys: KeyCache;
  log: (line: string) => void;
  /** This agent's id: keys of projects owned by another agent are forwarded to it through `peers`. */
  agentId?: string;
  /** The other agents (several agents); without it every key is served here. */
  peers?: Peers;
  /** Origins whose pages may call `/v2` (`SVCD_CORS_ORIGINS`, docs/api.md "Browsers and CORS"); default none. */
  cors?: CorsPolicy;
  /** Told of every request once its answer is done or cut short (the agent's log line and metrics). */
  observe?: (request: ObservedRequest) => void;
  /**
   * Serves the requests other than `/v2` that arrive on a connection handed over by the local front
   * (`adopt`), `origin` being the front's URL; without it they are 404 like on the listener's own.
   */
  handed?: (req: IncomingMessage, res: ServerResponse, expectsContinue: boolean, origin: string) => void;
}

/** A `/v2` request as observed: bytes are those of its connection while it was served, heads included. */
export interface ObservedRequest {
  requestId: string;
  method: string;
  /** The status answered (0 when the connection closed before any). */
  status: number;
  seconds: number;
  bytesIn: number;
  bytesOut: number;
  /** The project of its key, once the key was verified. */
  projectId?: string;
}

const BYTES_MARK = Symbol('bytes-mark');

/**
 * Bytes read and written on `req`'s connection since the last request on it was observed: the
 * request's share of a kept-alive connection (requests on one connection are served in turn).
 */
function connectionBytes(req: IncomingMessage): { bytesIn: number; bytesOut: number } {
  const socket = req.socket as IncomingMessage['socket'] & { [BYTES_MARK]?: [number, number] };
  const [read, written] = socket[BYTES_MARK] ?? [0, 0];
  const now: [number, number] = [socket.bytesRead, socket.bytesWritten];
  socket[BYTES_MARK] = now;
  return { bytesIn: now[0] - read, bytesOut: now[1] - written };
}

/**
 * Marks a request one agent forwarded to another (its value: the forwarding agent's id). A request
 * carrying it is never forwarded again, and it never reaches an engine. A load balancer in front of
 * the agents should drop it from client requests (a client that sends it only loses forwarding).
 */
export const FORWARDED_BY = 'x-svc-forwarded-by';

/** A running listener. */
export interface Dataplane {
  server: Server;
  url: string;
  port: number;
  upstreams: Upstreams;
  /** Forgets a project's upstream pool (its engine exited). */
  engineExited(projectId: string): void;
  /**
   * Serves a connection the local front accepted and handed over (shared/http/handoff.ts), `head`
   * being what the front read of it; its requests other than `/v2` go to `handed`.
   */
  adopt(socket: Socket, head: Buffer, origin: string): void;
  close(): Promise<void>;
}

/** Marks a handed connection's socket with the origin of the front that handed it over. */
const HANDED_FROM = Symbol('handed-from');

/** True for `/v2`, `/v2/...` and `/v2?...`: what this listener serves. */
function isDataPlanePath(path: string): boolean {
  return path === '/v2' || path.startsWith('/v2/') || path.startsWith('/v2?');
}

const PROJECT_REF = /^(?:prj_)?([0-9a-f]{16})$/;

let idPool = Buffer.alloc(0);
let idOffset = 0;

/** `req_` + 16 hex (the format of shared/ids.ts newRequestId), from a pooled CSPRNG buffer: one
 * getrandom call per 512 requests instead of one per request on the hot path. */
function requestId(): string {
  if (idOffset + 8 > idPool.length) {
    idPool = randomBytes(8 * 512);
    idOffset = 0;
  }
  const id = `req_${idPool.toString('hex', idOffset, idOffset + 8)}`;
  idOffset += 8;
  return id;
}

/** What the listener reads from a request's headers, in one pass over the raw list. */
interface Scanned {
  authorization: string[];
  projectRefs: string[];
  contentLength: string | undefined;
  chunked: boolean;
  /** `X-Svc-Forwarded-By` values: the request came from another agent. */
  forwardedBy: string[];
  /** `Origin` and `Access-Control-Request-Method`: a browser's request, or its preflight. */
  origin: string | undefined;
  preflightMethod: string | undefined;
  /** Headers for the engine, undici's flat `[name, value, ...]`: no hop-by-hop ones, no credential, no host. */
  forwarded: string[];
}

/**
 * One pass over `rawHeaders` (duplicates kept, which `req.headers` would fold or drop) instead of
 * node's two lazily built header objects: the hot path reads headers once.
 */
function scan(raw: string[]): Scanned {
  const out: Scanned = {
    authorization: [],
    projectRefs: [],
    contentLength: undefined,
    chunked: false,
    forwardedBy: [],
    origin: undefined,
    preflightMethod: undefined,
    forwarded: [],
  };
  let connection: string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    switch (name) {
      case 'authorization':
        out.authorization.push(value);
        continue;
      case 'x-svc-project':
        out.projectRefs.push(value);
        break;
      case 'content-length':
        out.contentLength = value;
        break;
      case 'transfer-encoding':
        out.chunked = true;
        continue;
      case 'connection':
        (connection ??= []).push(value);
        continue;
      case FORWARDED_BY:
        out.forwardedBy.push(value);
        continue;
      case 'origin':
        out.origin = value;
        break;
      case 'access-control-request-method':
        out.preflightMethod = value;
        break;
      case 'host':
      case 'expect':
        continue;
    }
    if (!HOP_BY_HOP.has(name)) out.forwarded.push(raw[i]!, value);
  }
  const listed = connectionTokens(connection);
  if (listed) {
    // Names listed in Connection are hop-by-hop too; the credential is never one.
    const kept: string[] = [];
    for (let i = 0; i < out.forwarded.length; i += 2) {
      if (!isHopByHop(out.forwarded[i]!.toLowerCase(), listed)) kept.push(out.forwarded[i]!, out.forwarded[i + 1]!);
    }
    out.forwarded = kept;
  }
  return out;
}

/** The bearer token of exactly one Authorization header, by the rules of shared/auth.ts parseBearer. */
function bearerOf(values: string[]): string {
  if (values.length > 1) throw errors.unauthenticated('the Authorization header must appear exactly once');
  return bearerToken(values.length === 0 ? null : values[0]!);
}

/** Bodies up to this size are taken whole (below node's 16 KiB request buffer, so nothing extra is held). */
const SMALL_BODY = 8 * 1024;

/**
 * A small body once the whole of it has arrived, read from node's request buffer in one piece;
 * undefined when the client goes away first.
 */
function arrived(req: IncomingMessage): Promise<Buffer | null | undefined> {
  const take = () => (req.readableLength > 0 ? (req.read() as Buffer) : null);
  if (req.complete) return Promise.resolve(take());
  return new Promise((resolve) => {
    const onReadable = () => {
      if (!req.complete) return;
      cleanup();
      resolve(take());
    };
    const onClose = () => {
      cleanup();
      resolve(undefined);
    };
    const cleanup = () => {
      req.off('readable', onReadable);
      req.off('close', onClose);
    };
    req.on('readable', onReadable);
    req.once('close', onClose);
  });
}

/**
 * The request body as undici reads it. Iterated rather than handed over as a stream because undici
 * destroys a stream body when the upstream fails, which would reset the client's connection before
 * it could be told 502; the iterator leaves `req` alive (`destroyOnReturn: false`). A body of
 * unknown length (chunked) is counted, failing with 413 once it passes `max`.
 */
async function* bodyOf(req: IncomingMessage, max: number | null): AsyncGenerator<Buffer> {
  let total = 0;
  for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    if (max !== null) {
      total += chunk.byteLength;
      if (total > max) throw errors.tooLarge(`request body exceeds ${max} bytes (SVCD_DATAPLANE_MAX_BYTES)`);
    }
    yield chunk;
  }
}

/** Starts the `/v2` listener on host:port (0: a free port). */
export async function startDataplane(options: DataplaneOptions): Promise<Dataplane> {
  const { endpoints, keys, maxBytes, log, agentId, peers, cors = NO_CORS, observe, handed } = options;
  const upstreams = new Upstreams();

  async function handle(req: IncomingMessage, res: ServerResponse, requestId: string, expectsContinue: boolean, seen: { projectId?: string }): Promise<void> {
    const path = req.url ?? '';
    const h = scan(req.rawHeaders);
    if (h.origin !== undefined) {
      // A browser's request (docs/api.md "Browsers and CORS"): its preflight is answered here, for
      // any path and without a credential; every other answer, errors and the engine's alike,
      // carries the CORS headers of an allowed origin.
      if (isPreflight(req.method, h.preflightMethod)) {
        res.writeHead(204, { ...preflightHeaders(cors, h.origin), 'x-request-id': requestId });
        res.end();
        return;
      }
      for (const [name, value] of Object.entries(corsAnswerHeaders(cors, h.origin))) res.setHeader(name, value);
    }
    if (!isDataPlanePath(path)) {
      throw badTarget(req) ?? errors.notFound(`no route for ${req.method} ${path.split('?')[0]}: this listener serves /v2 only`);
    }
    const presented = parseProjectKey(bearerOf(h.authorization));
    if (!presented) throw errors.unauthenticated('/v2 takes a project key (svc1_<key_id>_<secret>); a session token is not accepted');
    const { projectId, owner } = keys.verifyWarm(presented) ?? (await keys.verify(presented));
    seen.projectId = projectId;

    if (h.projectRefs.length > 0) {
      const m = h.projectRefs.length === 1 ? PROJECT_REF.exec(h.projectRefs[0]!) : null;
      if (!m || `prj_${m[1]}` !== projectId) {
        throw errors.denied('X-Svc-Project does not name the project of this key (expected prj_<16 hex> or the bare 16 hex)');
      }
    }

    const declared = h.contentLength;
    if (declared !== undefined && Number(declared) > maxBytes) {
      throw errors.tooLarge(`request body exceeds ${maxBytes} bytes (SVCD_DATAPLANE_MAX_BYTES)`);
    }

    // Where the request goes: the engine here, or (several agents) the agent that owns the project.
    let target: { engine: EngineEndpoint } | { peer: Peer };
    if (owner === undefined || owner === agentId) {
      const endpoint = endpoints.liveEndpoint(projectId);
      if (!endpoint) {
        throw new ServiceError('tenant_not_running', `project ${projectId} has no running engine: call POST /v0/projects/${projectId}/wakeup`);
      }
      target = { engine: endpoint };
    } else {
      if (h.forwardedBy.length > 0 || !peers) {
        // Forwarded here by an agent that believes this one owns the project (say an agent that
        // took over a dead one's address): one hop only, never a loop.
        throw errors.orchestrator(`project ${projectId} is hosted by another host agent; a forwarded request is not forwarded again`);
      }
      const peer = await peers.resolve(owner);
      if ('reason' in peer) {
        throw errors.orchestrator(
          peer.reason === 'stale'
            ? `the host agent of project ${projectId} is not answering (last heartbeat ${peer.heartbeatAt})`
            : `the host agent of project ${projectId} is not registered`,
        );
      }
      target = { peer };
    }

    // A client that asked `Expect: 100-continue` sends its body only now that every check passed;
    // a refused one never sends it.
    if (expectsContinue) res.writeContinue();
    let body: Buffer | AsyncGenerator<Buffer> | null = null;
    if (h.chunked) {
      body = bodyOf(req, maxBytes);
    } else if (declared !== undefined && declared !== '0') {
      const length = Number(declared);
      // Content-Length is enforced by node's parser (never more bytes than declared). A small body
      // (the usual SQL request) is taken whole once it has arrived: it is already in node's request
      // buffer, and one write upstream is much cheaper than stream machinery per request.
      if (length <= SMALL_BODY) {
        const whole = await arrived(req);
        if (whole === undefined) return; // the client went away before sending its body
        body = whole;
      } else {
        body = bodyOf(req, null);
      }
    }
    if ('peer' in target) {
      // The owner authenticates the key again and judges revocation itself; its answer (with its
      // X-Request-Id) comes back unchanged.
      const { peer } = target;
      try {
        await forward(peer.pool, req, res, {
          method: req.method ?? 'GET',
          path,
          headers: [...h.forwarded, 'authorization', h.authorization[0]!, FORWARDED_BY, agentId ?? ''],
          body,
        });
      } catch (err) {
        if (!(err instanceof UpstreamError)) throw err;
        if (err.cause instanceof ServiceError) throw err.cause;
        if (res.destroyed) return;
        peers!.suspect(peer.agentId);
        log(`dataplane: request ${requestId} forwarded to agent ${peer.agentId} (${peer.dataplaneUrl}) for ${projectId} failed: ${err.message}`);
        throw errors.orchestrator(`the host agent of project ${projectId} did not answer`);
      }
      return;
    }
    try {
      await forward(upstreams.for(projectId, target.engine), req, res, {
        method: req.method ?? 'GET',
        path,
        headers: h.forwarded,
        body,
        extraResponseHeaders: ['x-request-id', requestId],
      });
    } catch (err) {
      if (!(err instanceof UpstreamError)) throw err;
      if (err.cause instanceof ServiceError) throw err.cause;
      if (res.destroyed) return; // the client went away: nobody to answer
      // An engine killed behind the agent's back refuses connections before its exit is noticed
      // (docs/dataplane.md): the tenant is not running, which is 409, not an upstream fault.
      if (neverConnected(err, req.method ?? 'GET') && (await endpoints.engineGone?.(projectId, target.engine))) {
        throw new ServiceError('tenant_not_running', `project ${projectId} has no running engine (it exited): call POST /v0/projects/${projectId}/wakeup`);
      }
      log(`dataplane: request ${requestId} to the engine of ${projectId} failed: ${err.message}`);
      throw errors.upstream(`the engine of project ${projectId} did not answer`);
    }
  }

  const dataplaneLog = (line: string) => log(`dataplane: ${line}`);
  const onRequest = (req: IncomingMessage, res: ServerResponse, expectsContinue: boolean) => {
    const origin = (req.socket as Socket & { [HANDED_FROM]?: string })[HANDED_FROM];
    if (origin !== undefined && handed && !isDataPlanePath(req.url ?? '')) return handed(req, res, expectsContinue, origin);
    const id = requestId();
    const seen: { projectId?: string } = {};
    if (observe) {
      const started = performance.now();
      res.once('close', () => {
        const seconds = (performance.now() - started) / 1000;
        const status = res.headersSent ? res.statusCode : 0;
        observe({ requestId: id, method: req.method ?? 'GET', status, seconds, ...connectionBytes(req), ...(seen.projectId ? { projectId: seen.projectId } : {}) });
      });
    }
    // A body still arriving is not forwarded (it may be huge): the connection closes after the
    // answer, once the rest has been read and dropped (docs/dataplane.md "Refused bodies").
    handle(req, res, id, expectsContinue, seen).catch((thrown: unknown) => answerError(req, res, thrown, id, dataplaneLog));
  };
  // Absolute-form targets arrive as paths (shared/http/node-http.ts ServiceRequest).
  const server = createServer(SERVER_OPTIONS, (req, res) => onRequest(req, res, false));
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => onRequest(req, res, true));
  answerClientErrors(server);
  server.keepAliveTimeout = 65_000;
  await listen(server, options.host, options.port, 'SVCD_DATAPLANE_PORT');
  const port = (server.address() as AddressInfo).port;

  return {
    server,
    port,
    url: `http://${options.host}:${port}`,
    upstreams,
    engineExited: (projectId) => upstreams.retire(projectId),
    adopt(socket, head, origin) {
      (socket as Socket & { [HANDED_FROM]?: string })[HANDED_FROM] = origin;
      serveConnection(server, socket, head);
    },
    async close() {
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await Promise.all([closed, upstreams.close(), peers?.close()]);
    },
  };
}
