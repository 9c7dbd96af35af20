/**
 * Relaying requests to the handlers (and, in the local stack's fallback front, to the agents' `/v2`
 * listeners), with the connection handling docs/dataplane.md "One base URL (local stack)" and
 * "Refused bodies" describe. It judges nothing itself (authentication, limits and errors are the
 * agent's and the handlers') and adds nothing to what it relays either way: a request goes on with
 * the client's headers less the hop-by-hop ones, an answer comes back with its status line as given.
 * What it owns is connection handling:
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
 * - `/metrics` and `/metrics/<n>` go to the agents' metrics listeners (local only);
 * - `/v2` goes round-robin over the listeners it is given (several agents), a listener that refuses
 *   the connection skipped for a second; without any, `/v2` is 503;
 * - each request is logged in one line: method, path without query, status, milliseconds.
 *
 * Used by the agent's public listener when it is the local stack's origin (host-agent/dataplane/
 * origin.ts) and by the supervisor's fallback front while no agent holds that origin
 * (infra/local/front-proxy.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isLongLived as longLivedRoute, matchRoute } from '../api/index.ts';
import { Client, Pool, type Dispatcher } from 'undici';
import { ServiceError } from '../errors.ts';
import { newRequestId } from '../ids.ts';
import type { Log } from '../log.ts';
import { corsAnswerHeaders, NO_CORS, type CorsPolicy } from './cors.ts';
import { failureCode, neverConnected } from './failures.ts';
import { forward, keepAnswersConnect, upstreamRequestHeaders, UpstreamError } from './forward.ts';
import { answerError, badTarget } from './node-http.ts';

/** Where a relay sends requests. */
export interface RelayTargets {
  /** The handlers (miniflare). */
  handlers: string;
  /** The host agents' `/v2` listeners, taken in turn; none: `/v2` is 503. */
  dataplane?: string[];
  /** The host agents' metrics listeners: `/metrics` the first one's, `/metrics/<n>` the n-th's (docs/observability.md "Metrics"). */
  metrics?: string[];
}

/** Options of a relay. */
export interface RelayOptions {
  /** Receives one line per request (level `debug`) and the relay's failures. */
  log: Log;
  /** The first word of its log lines (`front`, `origin`). */
  name?: string;
  /** Connections to the handlers for ordinary requests (event streams and object bytes have no bound). */
  handlerConnections?: number;
  /** Origins allowed to read the relay's own error answers (`SVCD_CORS_ORIGINS`). */
  cors?: CorsPolicy;
  /** Make every answer the last on its connection (the fallback front: the client's next connection may reach the agent). */
  closeConnections?: boolean;
}

/** A relay: serves a request by relaying it, and closes its pools. */
export interface Relay {
  serve(req: IncomingMessage, res: ServerResponse): void;
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

/**
 * True for a request that may hold its connection for long: its declaration's bodies are bytes or
 * streams, or its answer an event stream (shared/api/ `isLongLived`: the routes production serves on
 * its Node workers, docs/deploy.md).
 */
export function isLongLived(method: string, path: string): boolean {
  const match = matchRoute(method, path.split('?', 1)[0]!);
  return match !== undefined && longLivedRoute(match.route);
}

/** The request's body as undici reads it, noting when its first chunk was pulled (from then on it cannot go elsewhere). */
function pulledBody(req: IncomingMessage, pulled: { yes: boolean }): AsyncIterable<Buffer> {
  // Iterated, not handed over as a stream: undici destroys a stream body when the upstream fails,
  // which would reset the client before it is answered.
  return (async function* () {
    for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      pulled.yes = true;
      yield chunk;
    }
  })();
}

/** Creates a relay to `targets`. */
export function createRelay(targets: RelayTargets, options: RelayOptions): Relay {
  const relay = new Relaying(targets, options);
  return { serve: (req, res) => relay.serve(req, res), close: () => relay.close() };
}

interface Plane {
  url: string;
  pool: Pool;
  /** Left out of the rotation until then (it refused a connection). */
  downUntil: number;
}

class Relaying {
  readonly #targets: RelayTargets;
  readonly #log: Log;
  readonly #name: string;
  readonly #cors: CorsPolicy;
  readonly #close: boolean;
  readonly #planes: Plane[];
  readonly #handlers: Pool;
  readonly #metrics: Pool[];
  readonly #longLived: Pool;
  readonly #oneShot = new Set<Client>();
  #turn = 0;

  constructor(targets: RelayTargets, { log, name = 'front', handlerConnections = 256, cors = NO_CORS, closeConnections = false }: RelayOptions) {
    const options = (connections: number | null, bodyTimeout: number) => ({ connections, connect: keepAnswersConnect(CONNECT_MS), headersTimeout: HEADERS_MS, bodyTimeout });
    this.#targets = targets;
    this.#log = log;
    this.#name = name;
    this.#cors = cors;
    this.#close = closeConnections;
    // The data plane answers quickly or streams an engine answer: no event streams there.
    this.#planes = (targets.dataplane ?? []).map((url) => ({ url, pool: new Pool(url, options(256, HEADERS_MS)), downUntil: 0 }));
    this.#handlers = new Pool(targets.handlers, options(handlerConnections, HEADERS_MS));
    this.#metrics = (targets.metrics ?? []).map((url) => new Pool(url, options(4, HEADERS_MS)));
    // No bound and no idle timeout: a subscription may stay open and silent for as long as it likes.
    this.#longLived = new Pool(targets.handlers, options(null, 0));
  }

  /** The next listener in turn that is not resting after a refused connection (else any), not yet tried. */
  #pick(tried: Set<number>): number | undefined {
    const now = Date.now();
    let fallback: number | undefined;
    for (let i = 0; i < this.#planes.length; i++) {
      const j = (this.#turn + i) % this.#planes.length;
      if (tried.has(j)) continue;
      if (this.#planes[j]!.downUntil <= now) {
        this.#turn = j + 1;
        return j;
      }
      fallback ??= j;
    }
    return fallback;
  }

  /** A fresh connection to `origin` for one request (a retry after a reset pooled connection). */
  #freshClient(origin: string): Client {
    const client = new Client(origin, { connect: keepAnswersConnect(CONNECT_MS), headersTimeout: HEADERS_MS, bodyTimeout: 0 });
    this.#oneShot.add(client);
    return client;
  }

  /**
   * Sends the request upstream: to the `/v2` listeners in turn (the next one while connections are
   * refused), or to the handlers; once more on a fresh connection when a request without a body
   * met a reset connection before any answer.
   */
  async #send(req: IncomingMessage, res: ServerResponse, method: string, path: string, headers: string[], hasBody: boolean): Promise<void> {
    const scrape = metricsTarget(path);
    if (scrape !== null) {
      if (!this.#metrics[scrape]) throw new ServiceError('not_found', `no host agent ${scrape + 1} in this stack`);
      return forward(this.#metrics[scrape]!, req, res, { method, path: '/metrics', headers, body: null });
    }
    const dataPlane = isDataPlane(path);
    if (dataPlane && this.#planes.length === 0) throw new UpstreamError(new Error('no host agent listener'));
    const tried = new Set<number>();
    let retry: Client | null = null;
    // The body is read only once a connection is made: until the first chunk is pulled the request can still go elsewhere.
    const pulled = { yes: false };
    const body = hasBody ? pulledBody(req, pulled) : null;
    for (;;) {
      let upstream: Dispatcher;
      let plane = -1;
      if (retry) upstream = retry;
      else if (dataPlane) {
        plane = this.#pick(tried)!;
        tried.add(plane);
        upstream = this.#planes[plane]!.pool;
      } else upstream = isLongLived(method, path) ? this.#longLived : this.#handlers;
      try {
        // workerd never says Connection: close, even when it leaves a body unread and closes: a connection that carried a body to it is not reused.
        return await forward(upstream, req, res, { method, path, headers, body, reset: hasBody && !dataPlane });
      } catch (err) {
        if (!(err instanceof UpstreamError) || res.headersSent || res.destroyed) throw err;
        if (plane >= 0 && neverConnected(err) && !pulled.yes && tried.size < this.#planes.length) {
          this.#planes[plane]!.downUntil = Date.now() + DOWN_MS;
          continue;
        }
        if (retry !== null || hasBody || !IDEMPOTENT.has(method) || !RESET.has(String(failureCode(err)))) throw err;
        retry = this.#freshClient(plane >= 0 ? this.#planes[plane]!.url : this.#targets.handlers);
      } finally {
        if (retry && upstream === retry) {
          this.#oneShot.delete(retry);
          void retry.close().catch(() => {});
        }
      }
    }
  }

  /**
   * Answers `err` through the one renderer, with the CORS headers of an allowed origin so a page can
   * read it (docs/api.md "Browsers and CORS"); whatever failed, the connection is not reused.
   */
  #fail(req: IncomingMessage, res: ServerResponse, err: ServiceError): void {
    res.shouldKeepAlive = false;
    if (!res.headersSent) for (const [header, value] of Object.entries(corsAnswerHeaders(this.#cors, req.headers.origin))) res.setHeader(header, value);
    answerError(req, res, err, newRequestId());
  }

  serve(req: IncomingMessage, res: ServerResponse): void {
    const started = performance.now();
    const method = req.method ?? 'GET';
    const path = req.url ?? '/';
    const refused = badTarget(req);
    const name = this.#name;
    if (this.#close) res.shouldKeepAlive = false;
    // One line per request; never the query (it may hold a ticket) nor any header.
    res.once('close', () => {
      const status = res.headersSent ? String(res.statusCode) : 'closed';
      this.#log(`${name}: ${method} ${refused ? '(not a path)' : path.split('?', 1)[0]} ${status} ${(performance.now() - started).toFixed(1)} ms`, { level: 'debug', event: name });
    });
    if (refused) return this.#fail(req, res, refused);
    const cl = req.headers['content-length'];
    const hasBody = req.headers['transfer-encoding'] !== undefined || (cl !== undefined && cl !== '0');
    // Nothing is added: upstream sees the client's headers less the hop-by-hop ones (docs/dataplane.md "One base URL (local stack)").
    this.#send(req, res, method, path, upstreamRequestHeaders(req, NOTHING), hasBody).catch((err: unknown) => {
      if (res.destroyed || res.headersSent) return this.#fail(req, res, new ServiceError('internal', 'cut short'));
      const what = isDataPlane(path) ? 'host agent' : 'handlers';
      this.#log(`${name}: ${method} ${path.split('?', 1)[0]} to the ${what} failed: ${(err as Error).message}`);
      if (err instanceof ServiceError) this.#fail(req, res, err);
      else if (err instanceof UpstreamError) this.#fail(req, res, new ServiceError('orchestrator_unavailable', `the ${what} did not answer`));
      else this.#fail(req, res, new ServiceError('internal', `the local ${name} failed`));
    });
  }

  async close(): Promise<void> {
    const pools = [...this.#planes.map((p) => p.pool), ...this.#metrics, this.#handlers, this.#longLived, ...this.#oneShot];
    await Promise.all(pools.map((p) => p.destroy()));
  }
}
