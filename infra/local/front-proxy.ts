/**
 * The local stack's one origin (issue #5 "One base URL"; docs/dataplane.md): a small node:http front
 * on SVCD_HOST:SVCD_PORT that sends `/v2` and `/v2/...` to the host agent's `/v2` listener and
 * everything else to the handlers in miniflare, streaming both ways (host-agent/dataplane/forward.ts).
 * It judges nothing itself: authentication, limits and errors are the agent's and the handlers'.
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
  /** The host agent's `/v2` listener (its registered `dataplane_url`). */
  dataplane: string;
}

/** A running front. */
export interface Front {
  url: string;
  port: number;
  close(): Promise<void>;
}

const NOTHING = new Set<string>();

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
  const dataplane = new Pool(targets.dataplane, { connections: 256, headersTimeout: 300_000, bodyTimeout: 300_000 });
  const handlers = new Pool(targets.handlers, { connections: 256, headersTimeout: 300_000, bodyTimeout: 0 });

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = req.url ?? '/';
    const toDataPlane = isDataPlane(path);
    const cl = req.headers['content-length'];
    const body = req.headers['transfer-encoding'] !== undefined || (cl !== undefined && cl !== '0') ? req : null;
    const headers = upstreamRequestHeaders(req, NOTHING);
    headers.push('x-forwarded-host', req.headers.host ?? `${host}:${port}`, 'x-forwarded-proto', 'http');
    forward(toDataPlane ? dataplane : handlers, req, res, { method: req.method ?? 'GET', path, headers, body }).catch((err: unknown) => {
      if (res.destroyed) return;
      log(`front: ${req.method} ${path.split('?')[0]} to the ${toDataPlane ? 'host agent' : 'handlers'} failed: ${(err as Error).message}`);
      if (err instanceof UpstreamError) {
        fail(res, new ServiceError('orchestrator_unavailable', `the ${toDataPlane ? 'host agent' : 'handlers'} did not answer`));
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
      await Promise.all([closed, dataplane.destroy(), handlers.destroy()]);
    },
  };
}
