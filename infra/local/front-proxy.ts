/**
 * The local stack's one origin (docs/dataplane.md "One base URL (local stack)"): a small node:http
 * front on SVCD_HOST:SVCD_PORT that sends `/v2` and `/v2/...` to the host agent's `/v2` listener and
 * everything else to the handlers in miniflare, streaming both ways (shared/http/forward.ts).
 * It judges nothing itself (authentication, limits and errors are the agent's and the handlers') and
 * adds nothing to what it relays either way: a request goes on with the client's headers less the
 * hop-by-hop ones, an answer comes back with its status line as given.
 * What it does own is connection handling (docs/dataplane.md "Refused bodies"):
 *
 * - an answer an upstream gives before the body was sent in full (a 413, a 401, a 404) is relayed,
 *   even when the upstream then resets the connection we were still writing to, and the client's
 *   connection is closed after it once the rest of its body has been read and dropped;
 * - a connection to the handlers that carried a body is never reused (workerd closes one whose body
 *   it left unread without saying so), and a request without a body that meets a reset connection
 *   before any answer is sent once more on a fresh connection;
 * - event streams and object bytes (the routes production gives its Node workers, docs/deploy.md)
 *   go through a pool of their own with no bound, so open subscriptions never hold the connections
 *   ordinary requests need;
 * - each request is logged in one line: method, path without query, status, milliseconds.
 *
 * With several agents (`npm start -- --agents N`) it plays the load balancer production puts in
 * front of the engine machines: `/v2` requests go round-robin over every agent's listener, whatever
 * project they are for, so an agent that does not own the project forwards them in one hop
 * (docs/dataplane.md "Several agents"). A listener that refuses the connection is skipped for a
 * second and the request, of which nothing was sent, goes to the next one: a stopped agent does
 * not take the other agents' projects down with it (its own projects answer 503 from whichever
 * agent receives them).
 *
 * Why a front and not the handlers forwarding `/v2`: workerd would sit in every data-plane request
 * (measured in docs/dataplane.md), and a handler cannot know which agent owns a key without a
 * DynamoDB read per request, since handlers keep no state between requests.
 *
 * With one agent (`handoff` given), the front is not even a hop for `/v2` and realtime: a
 * connection whose first request is `/v2`, a realtime subscribe or a publish is handed to the
 * agent process itself (shared/http/handoff.ts), which serves it from then on as production's
 * load balancer would have sent it there (docs/local-stack.md "One hop for `/v2`"). Every other
 * connection, and every connection while the agent cannot take one, is the front's as above.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { Client, Pool, type Dispatcher } from 'undici';
import { ServiceError } from '../../shared/errors.ts';
import { newRequestId } from '../../shared/ids.ts';
import type { Log } from '../../shared/log.ts';
import { answerClientErrors, answerError, badTarget, listen, SERVER_OPTIONS } from '../../shared/http/node-http.ts';
import { corsAnswerHeaders, NO_CORS, type CorsPolicy } from '../../shared/http/cors.ts';
import { forward, keepAnswersConnect, upstreamRequestHeaders, UpstreamError } from '../../shared/http/forward.ts';
import { peekFirstLine, serveConnection } from '../../shared/http/handoff.ts';

/**
 * Hands an accepted connection, with the bytes already read from it, to the process that serves it
 * from then on (the host agent), telling it `origin` (where the front takes back the requests it
 * does not serve itself); false when that process cannot take one now (the front keeps it then).
 */
export type Handoff = (socket: Socket, head: Buffer, origin: string) => boolean;

/** Where the front sends requests. */
export interface FrontTargets {
  /** The handlers (miniflare). */
  handlers: string;
  /** The host agents' `/v2` listeners (their registered `dataplane_url`s), taken in turn. */
  dataplane: string | string[];
  /**
   * The host agents' metrics listeners: `{base_url}/metrics` is the first one's exposition and
   * `/metrics/<n>` the n-th's (docs/observability.md "Metrics"). Local only: production keeps them
   * off the public origin.
   */
  metrics?: string[];
  /**
   * The one agent's process, which takes connections whose first request it serves itself (`/v2`,
   * realtime subscribe and publish; `handsOff`). Unset with several agents: the front then plays
   * the load balancer for every `/v2` request.
   */
  handoff?: Handoff;
}

/** Options of the front. */
export interface FrontOptions {
  host: string;
  port: number;
  /** Receives one line per request (level `debug`: the handlers and agents log their own), and the front's failures. */
  log: Log;
  /** Connections to the handlers for ordinary requests (event streams and object bytes have no bound). */
  handlerConnections?: number;
  /**
   * Origins allowed to read the front's own error answers (`SVCD_CORS_ORIGINS`). Preflights and
   * every other answer are the handlers' and the agents' and pass through unchanged.
   */
  cors?: CorsPolicy;
}

/** A running front. */
export interface Front {
  url: string;
  port: number;
  close(): Promise<void>;
}

const NOTHING = new Set<string>();

/** How long a listener that refused a connection is left out of the rotation. */
const DOWN_MS = 1_000;

const CONNECT_MS = 10_000;
const HEADERS_MS = 300_000;

/** Methods whose request may be sent twice (RFC 9110 §9.2.2), when it has no body. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/** Failures of a connection that was reset or closed under a request (a stale pooled connection). */
const RESET = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

/** The routes production serves on its Node workers: event streams, object bytes and function invocations (docs/deploy.md). */
const LONG_LIVED = /^\/v0\/projects\/[^/?]+\/(?:realtime\/subscribe(?:\?|$)|storage\/objects\/[^/?]+\/|functions\/[^/?]+\/invoke(?:[/?]|$))/;

function causeCode(err: UpstreamError): unknown {
  return (err.cause as { code?: unknown } | undefined)?.code;
}

/** A connection that was never made: nothing of the request was sent, so another listener may take it. */
function neverConnected(err: UpstreamError): boolean {
  const code = causeCode(err);
  return code === 'ECONNREFUSED' || code === 'UND_ERR_CONNECT_TIMEOUT';
}

/** Which agent's metrics `path` asks for (0-based): `/metrics` the first, `/metrics/<n>` the n-th; null for any other path. */
export function metricsTarget(path: string): number | null {
  const m = /^\/metrics(?:\/(\d{1,2}))?\/?(?:\?.*)?$/.exec(path);
  if (!m) return null;
  return m[1] === undefined ? 0 : Math.max(0, Number(m[1]) - 1);
}

/** True for `/v2`, `/v2/...` and `/v2?...`: the data plane. */
export function isDataPlane(path: string): boolean {
  return path === '/v2' || path.startsWith('/v2/') || path.startsWith('/v2?');
}

/** The request targets the agent serves itself on a handed connection: `/v2`, realtime subscribe and publish. */
const HANDED = /^(?:(?:[A-Z]+) \/v2(?:[/? ]|$)|GET \/v0\/projects\/[^/? ]+\/realtime\/subscribe[? ]|POST \/v0\/projects\/[^/? ]+\/realtime\/publish[? ]|[A-Z]+ \/v0\/projects\/[^/? ]+\/functions\/[^/? ]+\/invoke[/? ])/;

/**
 * True when a connection whose first bytes are `head` goes to the agent: its request line names `/v2`
 * (any method), a realtime subscribe (`GET`) or a publish (`POST`), in origin form. Anything else —
 * an absolute-form target, a line not yet complete — stays with the front, which serves it all.
 */
export function handsOff(head: Buffer): boolean {
  const eol = head.indexOf(0x0a);
  return eol > 0 && HANDED.test(head.toString('latin1', 0, Math.min(eol, 512)));
}

/** True for a request that may hold its connection for long: an event stream or object bytes. */
export function isLongLived(method: string, path: string): boolean {
  return (method === 'GET' || method === 'HEAD' || method === 'PUT') && LONG_LIVED.test(path);
}

/**
 * Answers `err` through the one renderer, with the CORS headers of an allowed origin so a page can
 * read it (docs/api.md "Browsers and CORS"); whatever failed, the connection is not reused.
 */
function fail(req: IncomingMessage, res: ServerResponse, err: ServiceError, cors: CorsPolicy): void {
  res.shouldKeepAlive = false;
  if (!res.headersSent) for (const [name, value] of Object.entries(corsAnswerHeaders(cors, req.headers.origin))) res.setHeader(name, value);
  answerError(req, res, err, newRequestId());
}

/** Starts the front on host:port (0: a free port). */
export async function startFront(targets: FrontTargets, { host, port, log, handlerConnections = 256, cors = NO_CORS }: FrontOptions): Promise<Front> {
  const options = (connections: number | null, bodyTimeout: number) => ({
    connections,
    connect: keepAnswersConnect(CONNECT_MS),
    headersTimeout: HEADERS_MS,
    bodyTimeout,
  });
  // The data plane answers quickly or streams an engine answer: no event streams there.
  const planes = (Array.isArray(targets.dataplane) ? targets.dataplane : [targets.dataplane]).map((url) => ({
    url,
    pool: new Pool(url, options(256, HEADERS_MS)),
    downUntil: 0,
  }));
  const handlers = new Pool(targets.handlers, options(handlerConnections, HEADERS_MS));
  const metrics = (targets.metrics ?? []).map((url) => ({ url, pool: new Pool(url, options(4, HEADERS_MS)) }));
  // No bound and no idle timeout: a subscription may stay open and silent for as long as it likes.
  const longLived = new Pool(targets.handlers, options(null, 0));
  const oneShot = new Set<Client>();
  let turn = 0;

  /** The next listener in turn that is not resting after a refused connection (else any), not yet tried. */
  function pick(tried: Set<number>): number | undefined {
    const now = Date.now();
    let fallback: number | undefined;
    for (let i = 0; i < planes.length; i++) {
      const j = (turn + i) % planes.length;
      if (tried.has(j)) continue;
      if (planes[j]!.downUntil <= now) {
        turn = j + 1;
        return j;
      }
      fallback ??= j;
    }
    return fallback;
  }

  /**
   * Sends the request upstream: to the `/v2` listeners in turn (the next one while connections are
   * refused), or to the handlers; once more on a fresh connection when a request without a body
   * met a reset connection before any answer.
   */
  async function send(req: IncomingMessage, res: ServerResponse, method: string, path: string, headers: string[], hasBody: boolean): Promise<void> {
    const dataPlane = isDataPlane(path);
    const scrape = metricsTarget(path);
    if (scrape !== null) {
      if (!metrics[scrape]) throw new ServiceError('not_found', `no host agent ${scrape + 1} in this stack`);
      await forward(metrics[scrape]!.pool, req, res, { method, path: '/metrics', headers, body: null });
      return;
    }
    const tried = new Set<number>();
    let retry: Client | null = null;
    // The body is read only once a connection is made: until the first chunk is pulled the
    // request can still go elsewhere. Iterated, not handed over as a stream: undici destroys a
    // stream body when the upstream fails, which would reset the client before it is answered.
    let pulled = false;
    const body = !hasBody
      ? null
      : (async function* () {
          for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
            pulled = true;
            yield chunk;
          }
        })();
    for (;;) {
      let upstream: Dispatcher;
      let plane = -1;
      if (retry) upstream = retry;
      else if (dataPlane) {
        plane = pick(tried)!;
        tried.add(plane);
        upstream = planes[plane]!.pool;
      } else upstream = isLongLived(method, path) ? longLived : handlers;
      try {
        // workerd never says Connection: close, even when it leaves a body unread and closes:
        // a connection that carried a body to it is not reused.
        await forward(upstream, req, res, { method, path, headers, body, reset: hasBody && !dataPlane });
        return;
      } catch (err) {
        if (!(err instanceof UpstreamError) || res.headersSent || res.destroyed) throw err;
        if (plane >= 0 && neverConnected(err) && !pulled && tried.size < planes.length) {
          planes[plane]!.downUntil = Date.now() + DOWN_MS;
          continue;
        }
        if (retry === null && !hasBody && IDEMPOTENT.has(method) && RESET.has(String(causeCode(err)))) {
          const origin = plane >= 0 ? planes[plane]!.url : targets.handlers;
          retry = new Client(origin, { connect: keepAnswersConnect(CONNECT_MS), headersTimeout: HEADERS_MS, bodyTimeout: 0 });
          oneShot.add(retry);
          continue;
        }
        throw err;
      } finally {
        if (retry && upstream === retry) {
          oneShot.delete(retry);
          void retry.close().catch(() => {});
        }
      }
    }
  }

  const server = createServer(SERVER_OPTIONS, (req: IncomingMessage, res: ServerResponse) => {
    const started = performance.now();
    const method = req.method ?? 'GET';
    const path = req.url ?? '/';
    const refused = badTarget(req);
    // One line per request; never the query (it may hold a ticket) nor any header.
    res.once('close', () => {
      const status = res.headersSent ? String(res.statusCode) : 'closed';
      log(`front: ${method} ${refused ? '(not a path)' : path.split('?', 1)[0]} ${status} ${(performance.now() - started).toFixed(1)} ms`, { level: 'debug', event: 'front' });
    });
    if (refused) return fail(req, res, refused, cors);
    const cl = req.headers['content-length'];
    const hasBody = req.headers['transfer-encoding'] !== undefined || (cl !== undefined && cl !== '0');
    // Nothing is added: upstream sees the client's headers less the hop-by-hop ones (docs/dataplane.md "One base URL (local stack)").
    const headers = upstreamRequestHeaders(req, NOTHING);
    send(req, res, method, path, headers, hasBody).catch((err: unknown) => {
      if (res.destroyed || res.headersSent) return fail(req, res, new ServiceError('internal', 'cut short'), cors);
      const what = isDataPlane(path) ? 'host agent' : 'handlers';
      log(`front: ${method} ${path.split('?', 1)[0]} to the ${what} failed: ${(err as Error).message}`);
      if (err instanceof UpstreamError) fail(req, res, new ServiceError('orchestrator_unavailable', `the ${what} did not answer`), cors);
      else fail(req, res, new ServiceError('internal', 'the local front failed'), cors);
    });
  });
  answerClientErrors(server, log);
  server.keepAliveTimeout = 65_000;
  const { handoff } = targets;
  // With a process to hand connections to, the front accepts them itself and reads the first
  // request line before deciding whose they are; without, its HTTP server listens directly. The
  // requests the agent does not serve on a handed connection come back to the HTTP server on a
  // loopback port of its own, where nothing is handed over again.
  let back = '';
  const listener = handoff
    ? createNetServer({ pauseOnConnect: true }, (socket) =>
        peekFirstLine(socket, (head) => {
          if (handsOff(head) && handoff(socket, head, back)) return;
          serveConnection(server, socket, head);
        }),
      )
    : server;
  if (handoff) {
    await listen(server, '127.0.0.1', 0);
    back = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }
  await listen(listener, host, port, 'SVCD_PORT');
  const actual = (listener.address() as AddressInfo).port;
  return {
    url: `http://${host}:${actual}`,
    port: actual,
    async close() {
      // Connections handed away are the agent's to close; the net listener's own close would wait for them.
      if (listener !== server) listener.close();
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await Promise.all([
        closed,
        ...planes.map((p) => p.pool.destroy()),
        ...metrics.map((m) => m.pool.destroy()),
        handlers.destroy(),
        longLived.destroy(),
        ...[...oneShot].map((c) => c.destroy()),
      ]);
    },
  };
}
