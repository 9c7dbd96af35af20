/**
 * One undici Pool per running engine, keyed by project (STYLE "Processes and streams"). A pool is
 * replaced when the project's engine moves to another address and dropped when the engine exits,
 * so no connection outlives the engine it was made to.
 */
import { Pool } from 'undici';

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

/** The pools of one agent's `/v2` listener. */
export class Upstreams {
  private readonly pools = new Map<string, { address: string; pool: Pool }>();

  /** The pool for `projectId`'s engine at `endpoint`, made on first use. */
  for(projectId: string, endpoint: EngineEndpoint): Pool {
    const address = `${endpoint.host}:${endpoint.port}`;
    const current = this.pools.get(projectId);
    if (current?.address === address) return current.pool;
    if (current) void current.pool.close().catch(() => {});
    const pool = new Pool(`http://${address}`, {
      connections: 128,
      connectTimeout: UPSTREAM_TIMEOUTS.connectMs,
      headersTimeout: UPSTREAM_TIMEOUTS.headersMs,
      bodyTimeout: UPSTREAM_TIMEOUTS.bodyMs,
    });
    this.pools.set(projectId, { address, pool });
    return pool;
  }

  /** Drops a project's pool (its engine exited): in-flight requests fail now rather than later. */
  drop(projectId: string): void {
    const current = this.pools.get(projectId);
    if (!current) return;
    this.pools.delete(projectId);
    void current.pool.destroy().catch(() => {});
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
