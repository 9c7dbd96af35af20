/**
 * One undici Pool per running engine, keyed by project (docs/dataplane.md "The `/v2` listener (host agent)"). A pool is
 * replaced when the project's engine moves to another address and dropped when the engine exits,
 * so no connection outlives the engine it was made to.
 */
import { Pool } from 'undici';
import { keepAnswersConnect } from '../../shared/http/forward.ts';

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
