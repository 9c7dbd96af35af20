/**
 * The `/v2` listener of a host agent (contract "DELETE /v2/{path}", "Authentication" 2–4,
 * "Versioning" 2; docs/dataplane.md), and, in the local stack, the public origin beside it
 * (./origin.ts). Its phases, as Neon's proxy separates them:
 *
 * - accept: the listeners — its own port (`SVCD_DATAPLANE_PORT`), or the one the supervisor holds
 *   and passes on (shared/http/held-listeners.ts), and the origin (`SVCD_PORT`) when given one;
 * - connection: node:http's, with the service's request line rules and malformed-request answers
 *   (shared/http/node-http.ts);
 * - request: a browser's preflight and CORS headers, then `/v2` (./v2.ts) or, at the origin, every
 *   other route (./origin.ts); one observation per request (the agent's log line and metrics).
 *
 * Errors the service produces carry the error envelope and `X-Request-Id`. A warm request reads
 * nothing from DynamoDB (host-agent/dataplane/key-cache.ts).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { answeredErrorCode, errors } from '../../shared/errors.ts';
import { answerClientErrors, answerError, badTarget, listen, SERVER_OPTIONS } from '../../shared/http/node-http.ts';
import { corsAnswerHeaders, isPreflight, NO_CORS, preflightHeaders, type CorsPolicy } from '../../shared/http/cors.ts';
import type { ListenerSource } from '../../shared/http/held-listeners.ts';
import type { KeyCache } from './key-cache.ts';
import { createOrigin, type Origin, type OriginOptions } from './origin.ts';
import type { Peers } from './peers.ts';
import { connectionBytes, requestId, scan } from './request.ts';
import { Upstreams } from './upstreams.ts';
import { serveV2, type EngineEndpoints, type V2Context } from './v2.ts';

export { FORWARDED_BY } from './request.ts';
export type { EngineEndpoints } from './v2.ts';

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
  /** Told of every `/v2` request once its answer is done or cut short (the agent's log line and metrics). */
  observe?: (request: ObservedRequest) => void;
  /** Listeners the supervisor holds (the local stack): `SVCD_DATAPLANE_PORT`, and `SVCD_PORT` for the origin. */
  held?: ListenerSource;
  /** Serve the public origin on the held `SVCD_PORT`: what it relays and the routes it serves itself. */
  origin?: Omit<OriginOptions, 'cors'>;
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
  /** The error code of the service's own refusal, if it answered one (not the engine's). */
  code?: string;
}

/** A running listener. */
export interface Dataplane {
  server: Server;
  url: string;
  port: number;
  upstreams: Upstreams;
  /** Forgets a project's upstream pool (its engine exited). */
  engineExited(projectId: string): void;
  close(): Promise<void>;
}

/** True for `/v2`, `/v2/...` and `/v2?...`: what this listener serves. */
function isDataPlanePath(path: string): boolean {
  return path === '/v2' || path.startsWith('/v2/') || path.startsWith('/v2?');
}

/**
 * The request phase: CORS (a browser's preflight is answered here, for any path and without a
 * credential; every other answer, errors and the engine's alike, carries the CORS headers of an
 * allowed origin), the request line, then `/v2` or the origin's other routes.
 */
function requestHandler(c: V2Context, cors: CorsPolicy, observe: DataplaneOptions['observe'], origin: Origin | null) {
  const log = (line: string) => c.log(`dataplane: ${line}`);
  return (req: IncomingMessage, res: ServerResponse, expectsContinue: boolean): void => {
    const path = req.url ?? '';
    const v2 = isDataPlanePath(path);
    if (origin && !v2 && !badTarget(req)) return origin.serve(req, res, expectsContinue);
    const id = requestId();
    const seen: { projectId?: string } = {};
    // Observed: every request of the `/v2` listener, and the origin's `/v2` ones.
    if (observe && (v2 || !origin)) {
      const started = performance.now();
      res.once('close', () => {
        const status = res.headersSent ? res.statusCode : 0;
        const code = answeredErrorCode(res);
        observe({ requestId: id, method: req.method ?? 'GET', status, seconds: (performance.now() - started) / 1000, ...connectionBytes(req), ...(seen.projectId ? { projectId: seen.projectId } : {}), ...(code ? { code } : {}) });
      });
    }
    const h = scan(req.rawHeaders);
    if (h.origin !== undefined) {
      if (isPreflight(req.method, h.preflightMethod)) {
        res.writeHead(204, { ...preflightHeaders(cors, h.origin), 'x-request-id': id });
        res.end();
        return;
      }
      for (const [name, value] of Object.entries(corsAnswerHeaders(cors, h.origin))) res.setHeader(name, value);
    }
    const refused = badTarget(req) ?? (v2 ? null : errors.notFound(`no route for ${req.method} ${path.split('?')[0]}: this listener serves /v2 only`));
    // A body still arriving is not forwarded (it may be huge): the connection closes after the
    // answer, once the rest has been read and dropped (docs/dataplane.md "Refused bodies").
    if (refused) return answerError(req, res, refused, id, log);
    serveV2(c, req, res, h, id, expectsContinue, seen).catch((thrown: unknown) => answerError(req, res, thrown, id, log));
  };
}

/** The accept phase: a node:http server for `onRequest`, listening on its port or a held one. */
async function listener(onRequest: ReturnType<typeof requestHandler>, host: string, port: number, setting: string, held: ListenerSource | undefined): Promise<{ server: Server; port: number }> {
  // Absolute-form targets arrive as paths (shared/http/node-http.ts ServiceRequest).
  const server = createServer(SERVER_OPTIONS, (req, res) => onRequest(req, res, false));
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => onRequest(req, res, true));
  answerClientErrors(server);
  server.keepAliveTimeout = 65_000;
  return { server, port: await listen(server, host, port, setting, held) };
}

function closeServer(server: Server): Promise<void> {
  const closed = new Promise<void>((r) => server.close(() => r()));
  server.closeAllConnections();
  return closed;
}

/** Starts the `/v2` listener on host:port (0: a free port), and the origin when asked for. */
export async function startDataplane(options: DataplaneOptions): Promise<Dataplane> {
  const { endpoints, keys, maxBytes, log, agentId, peers, cors = NO_CORS, observe, held } = options;
  const upstreams = new Upstreams();
  const c: V2Context = { endpoints, keys, maxBytes, upstreams, log, agentId, peers };
  const own = await listener(requestHandler(c, cors, observe, null), options.host, options.port, 'SVCD_DATAPLANE_PORT', held);
  let origin: Origin | null = null;
  let originServer: Server | null = null;
  if (options.origin && held?.heldPort('SVCD_PORT') !== undefined) {
    origin = createOrigin({ ...options.origin, cors });
    originServer = (await listener(requestHandler(c, cors, observe, origin), options.host, 0, 'SVCD_PORT', held)).server;
  }
  return {
    server: own.server,
    port: own.port,
    url: `http://${options.host}:${own.port}`,
    upstreams,
    engineExited: (projectId) => upstreams.retire(projectId),
    async close() {
      await Promise.all([closeServer(own.server), originServer && closeServer(originServer), origin?.close(), upstreams.close(), peers?.close()]);
    },
  };
}
