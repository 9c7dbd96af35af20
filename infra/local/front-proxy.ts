/**
 * The local stack's one origin (issue #5 "One base URL"; docs/dataplane.md): a small node:http front
 * on SVCD_HOST:SVCD_PORT that sends `/v2` and `/v2/...` to the host agent's `/v2` listener and
 * everything else to the handlers in miniflare, streaming both ways (host-agent/dataplane/forward.ts).
 * It judges nothing itself: authentication, limits and errors are the agent's and the handlers'.
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
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { ServiceError, WWW_AUTHENTICATE, envelopeOf } from '../../shared/errors.ts';
import { newRequestId } from '../../shared/ids.ts';
import { listen } from '../../shared/node-http.ts';
import { forward, upstreamRequestHeaders, UpstreamError } from '../../host-agent/dataplane/forward.ts';

/** Where the front sends requests. */
export interface FrontTargets {
  /** The handlers (miniflare). */
  handlers: string;
  /** The host agents' `/v2` listeners (their registered `dataplane_url`s), taken in turn. */
  dataplane: string | string[];
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

/** A connection that was never made: nothing of the request was sent, so another listener may take it. */
function neverConnected(err: UpstreamError): boolean {
  const code = (err.cause as { code?: unknown } | undefined)?.code;
  return code === 'ECONNREFUSED' || code === 'UND_ERR_CONNECT_TIMEOUT';
}

/** True for `/v2`, `/v2/...` and `/v2?...`: the data plane. */
export function isDataPlane(path: string): boolean {
  return path === '/v2' || path.startsWith('/v2/') || path.startsWith('/v2?');
}

function fail(res: ServerResponse, err: ServiceError): void {
  if (res.headersSent || res.destroyed) return void res.destroy();
  const body = JSON.stringify(envelopeOf(err));
  const headers: Record<string, string | number> = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'x-request-id': newRequestId(),
    connection: 'close',
  };
  if (err.code === 'authentication_required') headers['www-authenticate'] = WWW_AUTHENTICATE;
  res.writeHead(err.status, headers).end(body);
}

/** Starts the front on host:port (0: a free port). */
export async function startFront(
  targets: FrontTargets,
  { host, port, log }: { host: string; port: number; log: (line: string) => void },
): Promise<Front> {
  // The data plane answers quickly or streams an engine answer; the handlers may hold an event
  // stream open for long (realtime subscribe), so no idle timeout on their bodies.
  const planes = (Array.isArray(targets.dataplane) ? targets.dataplane : [targets.dataplane]).map((url) => ({
    url,
    pool: new Pool(url, { connections: 256, headersTimeout: 300_000, bodyTimeout: 300_000 }),
    downUntil: 0,
  }));
  const handlers = new Pool(targets.handlers, { connections: 256, headersTimeout: 300_000, bodyTimeout: 0 });
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

  /** Sends a `/v2` request to a listener, trying the next one while connections are refused. */
  async function toDataPlane(req: IncomingMessage, res: ServerResponse, path: string, headers: string[], hasBody: boolean): Promise<void> {
    const tried = new Set<number>();
    for (;;) {
      const i = pick(tried)!;
      tried.add(i);
      // The body is read only once the connection is made: until the first chunk is pulled the
      // request can still go elsewhere.
      let pulled = false;
      const body = !hasBody
        ? null
        : planes.length === 1
          ? req
          : (async function* () {
              for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
                pulled = true;
                yield chunk;
              }
            })();
      try {
        await forward(planes[i]!.pool, req, res, { method: req.method ?? 'GET', path, headers, body });
        return;
      } catch (err) {
        if (!(err instanceof UpstreamError) || !neverConnected(err) || pulled || tried.size === planes.length) throw err;
        planes[i]!.downUntil = Date.now() + DOWN_MS;
      }
    }
  }

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = req.url ?? '/';
    const dataPlane = isDataPlane(path);
    const cl = req.headers['content-length'];
    const hasBody = req.headers['transfer-encoding'] !== undefined || (cl !== undefined && cl !== '0');
    const headers = upstreamRequestHeaders(req, NOTHING);
    headers.push('x-forwarded-host', req.headers.host ?? `${host}:${port}`, 'x-forwarded-proto', 'http');
    const sent = dataPlane
      ? toDataPlane(req, res, path, headers, hasBody)
      : forward(handlers, req, res, { method: req.method ?? 'GET', path, headers, body: hasBody ? req : null });
    sent.catch((err: unknown) => {
      if (res.destroyed) return;
      log(`front: ${req.method} ${path.split('?')[0]} to the ${dataPlane ? 'host agent' : 'handlers'} failed: ${(err as Error).message}`);
      if (err instanceof UpstreamError) {
        fail(res, new ServiceError('orchestrator_unavailable', `the ${dataPlane ? 'host agent' : 'handlers'} did not answer`));
      } else {
        fail(res, new ServiceError('internal', 'the local front failed'));
      }
    });
  });
  server.keepAliveTimeout = 65_000;
  await listen(server, host, port, 'SVCD_PORT');
  const actual = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${actual}`,
    port: actual,
    async close() {
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await Promise.all([closed, ...planes.map((p) => p.pool.destroy()), handlers.destroy()]);
    },
  };
}
