/**
 * One undici Pool per running engine, keyed by project (STYLE "Processes and streams"). A pool is
 * replaced when the project's engine moves to another address and dropped when the engine exits,
 * so no connection outlives the engine it was made to.
 */
import type { Socket } from 'node:net';
import { buildConnector, Pool } from 'undici';

/** Where a running engine listens (host-agent/tenants liveEndpoint). */
export interface EngineEndpoint {
  host: string;
  port: number;
}

/**
 * Timeouts of an engine request. Explicit rather than inherited: the engine answers `/v2` with a
 * complete envelope (no event streams), so a long query may take minutes but a silent engine is a
 * fault. `connect` is short because the engine listens on loopback.
 */
export const UPSTREAM_TIMEOUTS = { connectMs: 5_000, headersMs: 300_000, bodyMs: 300_000 } as const;

/**
 * Pools keyed by what they reach: one agent's engines (by project) or its peers (by agent id,
 * host-agent/dataplane/peers.ts).
 */
export class Upstreams {
  private readonly pools = new Map<string, { origin: string; pool: Pool }>();

  /** The pool for `projectId`'s engine at `endpoint`, made on first use. */
  for(projectId: string, endpoint: EngineEndpoint): Pool {
    return this.forOrigin(projectId, `http://${endpoint.host}:${endpoint.port}`);
  }

  /** The pool for `key` at `origin`; one made to another origin before is closed and replaced. */
  forOrigin(key: string, origin: string): Pool {
    const current = this.pools.get(key);
    if (current?.origin === origin) return current.pool;
    if (current) void current.pool.close().catch(() => {});
    const pool = new Pool(origin, {
      connections: 128,
      connect: keepAnswersConnect(UPSTREAM_TIMEOUTS.connectMs),
      headersTimeout: UPSTREAM_TIMEOUTS.headersMs,
      bodyTimeout: UPSTREAM_TIMEOUTS.bodyMs,
    });
    this.pools.set(key, { origin, pool });
    return pool;
  }

  /** Drops a pool (its engine exited, its peer failed): in-flight requests fail now rather than later. */
  drop(key: string): void {
    const current = this.pools.get(key);
    if (!current) return;
    this.pools.delete(key);
    void current.pool.destroy().catch(() => {});
  }

  /**
   * Forgets the pool of an upstream that is gone (its engine exited) without cutting the requests
   * already on it: they end on their own at once, refused or reset by the dead engine's address,
   * which the /v2 listener can tell from a failure after the engine took a request in (a destroy
   * would turn both into the same error).
   */
  retire(key: string): void {
    const current = this.pools.get(key);
    if (!current) return;
    this.pools.delete(key);
    void current.pool.close().catch(() => {});
  }

  /** How many pools are open. */
  get size(): number {
    return this.pools.size;
  }

  /** Destroys every pool. */
  async close(): Promise<void> {
    const all = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(all.map((p) => p.pool.destroy().catch(() => {})));
  }
}

/** Write errors that mean the peer reset the connection: what it sent before is still readable. */
const PEER_GONE = new Set(['EPIPE', 'ECONNRESET']);

/** How long a connection whose write failed is kept for its read side to report, at most. */
const HELD_MS = 30_000;

/**
 * undici's connector (connect timeout `timeoutMs`) whose connections keep reading after a write
 * failed because the peer reset the connection. A server that answers before reading the whole
 * body and then closes (workerd always does; the 413 of a `/v2` listener or an engine) resets a
 * connection we are still writing to, but its answer has arrived first; node's socket would
 * destroy itself on the write error and throw that answer away unread, and the request would fail
 * as if the server had not answered (docs/dataplane.md "Refused bodies"). Here the failed write
 * simply never completes: nothing more is written, undici reads the answer and finishes the
 * request with it (then drops the connection, as it was still writing), or fails it when the read
 * side ends without one.
 */
export function keepAnswersConnect(timeoutMs: number): buildConnector.connector {
  const base = buildConnector({ timeout: timeoutMs });
  return (options, callback) =>
    base(options, (err, socket) => {
      if (socket) keepReadingAfterWriteFailure(socket as Socket);
      callback(err as never, socket as never);
    });
}

/** Intercepts `socket`'s write completions (one write is in flight at a time: no allocation per write). */
function keepReadingAfterWriteFailure(socket: Socket): void {
  const write = socket._write;
  const writev = socket._writev;
  let pending: ((err?: Error | null) => void) | null = null;
  const settled = (err?: Error | null) => {
    const cb = pending!;
    pending = null;
    if (err && PEER_GONE.has((err as NodeJS.ErrnoException).code ?? '')) {
      // Left pending: the writer waits for a drain that never comes. The read side reports what
      // the peer sent and how it ended; the socket goes then, or after HELD_MS at the latest.
      const timer = setTimeout(() => socket.destroy(err), HELD_MS);
      timer.unref();
      socket.once('close', () => clearTimeout(timer));
      return;
    }
    cb(err);
  };
  socket._write = function (this: Socket, chunk, encoding, cb) {
    pending = cb;
    write.call(this, chunk, encoding, settled);
  };
  if (writev) {
    socket._writev = function (this: Socket, chunks, cb) {
      pending = cb;
      writev.call(this, chunks, settled);
    };
  }
}
