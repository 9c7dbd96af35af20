/**
 * The local stack's fallback front (docs/local-stack.md "One origin"): the supervisor owns the
 * listening socket of `SVCD_PORT` and the first host agent serves it — `/v2`, realtime and key
 * invocations itself, everything else relayed to the handlers (host-agent/dataplane/origin.ts).
 * While no agent holds it (the agent is starting, restarting or down), the supervisor serves the
 * connections it accepts with this front instead, so `{base_url}/v0/health` still answers (503
 * `degraded` once no agent heartbeats) and every `/v0` route the handlers serve alone keeps working.
 *
 * It is a relay (shared/http/relay.ts) to the handlers, to the agents' metrics listeners and, with
 * several agents, round-robin to the other agents' `/v2` listeners, which forward a request for a
 * project they do not own in one hop (docs/dataplane.md "Several agents"). `startFront` also
 * listens on a port of its own (tests).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Log } from '../../shared/log.ts';
import { answerClientErrors, listen, SERVER_OPTIONS } from '../../shared/http/node-http.ts';
import { NO_CORS, type CorsPolicy } from '../../shared/http/cors.ts';
import { createRelay, type RelayTargets } from '../../shared/http/relay.ts';

export { metricsTarget, isDataPlane, isLongLived } from '../../shared/http/relay.ts';

/** Where the front sends requests. */
export interface FrontTargets {
  /** The handlers (miniflare). */
  handlers: string;
  /** The host agents' `/v2` listeners (their registered `dataplane_url`s), taken in turn. */
  dataplane: string | string[];
  /** The host agents' metrics listeners: `{base_url}/metrics` is the first one's, `/metrics/<n>` the n-th's. */
  metrics?: string[];
}

/** Options of the front. */
export interface FrontOptions {
  /** Receives one line per request (level `debug`), and the front's failures. */
  log: Log;
  /** Connections to the handlers for ordinary requests (event streams and object bytes have no bound). */
  handlerConnections?: number;
  /** Origins allowed to read the front's own error answers (`SVCD_CORS_ORIGINS`). */
  cors?: CorsPolicy;
  /** Close each connection after its answer, so the client's next one reaches the agent once it holds the origin again. */
  closeConnections?: boolean;
}

/** A front that serves the connections it is given. */
export interface FallbackFront {
  /** Serves a connection the supervisor accepted (paused or not). */
  serve(socket: Socket): void;
  close(): Promise<void>;
}

/** A front listening on a port of its own. */
export interface Front extends FallbackFront {
  url: string;
  port: number;
}

function frontServer(targets: FrontTargets, { log, handlerConnections, cors = NO_CORS, closeConnections }: FrontOptions): { server: Server; close: () => Promise<void> } {
  const relayTargets: RelayTargets = {
    handlers: targets.handlers,
    dataplane: Array.isArray(targets.dataplane) ? targets.dataplane : [targets.dataplane],
    metrics: targets.metrics,
  };
  const relay = createRelay(relayTargets, { log, name: 'front', handlerConnections, cors, closeConnections });
  const server = createServer(SERVER_OPTIONS, (req: IncomingMessage, res: ServerResponse) => relay.serve(req, res));
  answerClientErrors(server, log);
  server.keepAliveTimeout = 65_000;
  return {
    server,
    async close() {
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await Promise.all([closed, relay.close()]);
    },
  };
}

/** A front for the connections the supervisor hands it (not listening itself). */
export function createFront(targets: FrontTargets, options: FrontOptions): FallbackFront {
  const { server, close } = frontServer(targets, options);
  return {
    serve(socket) {
      socket.setNoDelay(true);
      server.emit('connection', socket);
      socket.resume();
    },
    close,
  };
}

/** Starts a front on host:port (0: a free port). */
export async function startFront(targets: FrontTargets, options: FrontOptions & { host: string; port: number }): Promise<Front> {
  const { server, close } = frontServer(targets, options);
  const port = await listen(server, options.host, options.port, 'SVCD_PORT');
  return {
    url: `http://${options.host}:${port}`,
    port,
    serve(socket) {
      server.emit('connection', socket);
      socket.resume();
    },
    close,
  };
}
