/**
 * Requests other than `/v2` on a connection the local front handed to this agent (docs/local-stack.md
 * "One hop for `/v2`"). A client keeps one connection for everything it asks of the base URL, so a
 * connection handed over for its first `/v2` request may carry `/v0` requests afterwards: those the
 * agent does not serve itself go back to the front that handed the connection over (its URL comes
 * with the connection), exactly as they arrived — method, target, headers (the `Host` the client
 * named included, so the front sees what it would have seen), body streamed — and the front's
 * answer comes back unchanged. A production agent is never handed connections: its load balancer
 * routes by path.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Pool } from 'undici';
import { ServiceError } from '../../shared/errors.ts';
import { forward, keepAnswersConnect, upstreamRequestHeaders, UpstreamError } from '../../shared/http/forward.ts';
import { answerError, targetAuthority } from '../../shared/http/node-http.ts';
import { newRequestId } from '../../shared/ids.ts';
import type { Log } from '../../shared/log.ts';

const NOTHING = new Set<string>();

/** The way back to the front that handed connections over: one pool per front origin. */
export class FrontReturn {
  private readonly pools = new Map<string, Pool>();
  private readonly log: (line: string) => void;

  constructor(log: (line: string) => void) {
    this.log = log;
  }

  /** Sends `req` to the front at `origin` and streams its answer into `res`. */
  send(req: IncomingMessage, res: ServerResponse, expectsContinue: boolean, origin: string): void {
    // The front answers `100 Continue` itself too: the client may send its body now.
    if (expectsContinue) res.writeContinue();
    const cl = req.headers['content-length'];
    const hasBody = req.headers['transfer-encoding'] !== undefined || (cl !== undefined && cl !== '0');
    const headers = upstreamRequestHeaders(req, NOTHING);
    const host = targetAuthority(req) ?? req.headers.host;
    if (host !== undefined) headers.push('host', host);
    // Iterated rather than handed over as a stream, so a failed upstream leaves `req` alive to answer (shared/http/forward.ts).
    const body = hasBody ? (req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) : null;
    forward(this.pool(origin), req, res, { method: req.method ?? 'GET', path: req.url ?? '/', headers, body }).catch((err: unknown) => {
      if (!(err instanceof UpstreamError)) this.log(`agent: a request handed back to the front failed: ${(err as Error).stack ?? err}`);
      const requestId = newRequestId();
      answerError(req, res, new ServiceError('orchestrator_unavailable', 'the local front did not answer'), requestId);
    });
  }

  /** Closes every pool. */
  async close(): Promise<void> {
    const all = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(all.map((p) => p.destroy().catch(() => {})));
  }

  private pool(origin: string): Pool {
    let pool = this.pools.get(origin);
    if (!pool) {
      // No bound and no body timeout: event streams and object bytes of other projects may pass here too.
      pool = new Pool(origin, { connections: null, connect: keepAnswersConnect(10_000), headersTimeout: 300_000, bodyTimeout: 0 });
      this.pools.set(origin, pool);
    }
    return pool;
  }
}

/**
 * The one log line of a public request the agent serves on a handed connection, written when its
 * answer is done, as the handlers log theirs (docs/observability.md "Logs"): the route's pattern,
 * never the path or the query; the project once `seen` names it.
 */
export function logHandedRequest(log: Log, req: IncomingMessage, res: ServerResponse, requestId: string, route: string, seen: { projectId?: string }): void {
  const started = performance.now();
  res.once('close', () =>
    log('request', {
      level: 'info',
      event: 'request',
      request_id: requestId,
      method: req.method ?? 'GET',
      route,
      status: res.headersSent ? res.statusCode : 0,
      duration_ms: Math.round((performance.now() - started) * 10) / 10,
      ...(seen.projectId ? { project_id: seen.projectId } : {}),
    }),
  );
}
