/**
 * Engine port allocation from `SVCD_ENGINE_PORTS` (docs/lifecycle.md "Starting an engine"): a port is handed out once, never
 * to two engines of this agent, and only after a probe found it free on the loopback host (other
 * programs, or other agents on the same machine, may hold ports in the range). Exhaustion is 503
 * `orchestrator_unavailable`. The search starts at a random offset so agents sharing a range rarely
 * race for the same port; the engine's own bind is still the final word (the supervisor retries on
 * another port when it fails).
 */
import { createServer } from 'node:net';
import { errors } from '../../shared/errors.ts';

/** True when `host:port` can be bound right now. */
export function portIsFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** The ports of one agent's engines. */
export class PortPool {
  readonly #first: number;
  readonly #last: number;
  readonly #host: string;
  readonly #taken = new Set<number>();

  constructor(range: [number, number], host = '127.0.0.1') {
    [this.#first, this.#last] = range;
    this.#host = host;
  }

  /** Ports currently handed out. */
  get inUse(): number {
    return this.#taken.size;
  }

  /** Marks a port as used by an engine found running (adoption at start). */
  claim(port: number): void {
    this.#taken.add(port);
  }

  /** A free port of the range, now reserved; 503 when none is left. `avoid` skips ports that just failed. */
  async acquire(avoid: ReadonlySet<number> = new Set()): Promise<number> {
    const size = this.#last - this.#first + 1;
    const start = Math.floor(Math.random() * size);
    for (let i = 0; i < size; i++) {
      const port = this.#first + ((start + i) % size);
      if (this.#taken.has(port) || avoid.has(port)) continue;
      this.#taken.add(port);
      if (await portIsFree(this.#host, port)) return port;
      this.#taken.delete(port);
    }
    throw errors.orchestrator(`no free engine port left in SVCD_ENGINE_PORTS (${this.#first}-${this.#last})`);
  }

  /** Returns a port to the pool. */
  release(port: number): void {
    this.#taken.delete(port);
  }
}
