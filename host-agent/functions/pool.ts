/**
 * The worker pool of this agent (docs/functions.md "Workers"). A worker serves up to its number of
 * slots of invocations at once (one HTTP connection each) and is pooled by its key — the function's
 * version, its project's secret set, and the origin its environment names — so a warm worker only
 * ever serves invocations that would have started it exactly as it is. A function has one current
 * key: when a deploy or a secret change gives it a new one, its idle workers of any other key exit
 * at once and its busy ones finish their invocations untouched, then exit.
 *
 * Invocations are packed onto the busiest worker of their key that has a free slot, and wait for a
 * worker being started when it will have one, so a burst of cold invocations starts as few workers
 * as it needs. Bounds: `max` workers on the agent (starting ones included); past it the least
 * recently used idle worker of any function makes room, and when every worker is busy the invocation
 * is refused (the caller answers 429 `function_busy`). An idle worker exits after `idleMs`.
 */
import type { Client } from 'undici';
import type { FunctionWorker } from './worker.ts';

/** A worker in the pool. */
export interface PooledWorker {
  readonly worker: FunctionWorker;
  /** `<project>/<name>` of the function it runs. */
  readonly fn: string;
  readonly key: string;
  /** Clients of the slots not in use. */
  readonly free: Client[];
  /** Invocations running on it now. */
  active: number;
  /** Exits once it has no invocation left. */
  retired: boolean;
  lastUsed: number;
  idleTimer: NodeJS.Timeout | undefined;
}

/** One slot of a worker, held for one invocation. */
export interface Lease {
  readonly pooled: PooledWorker;
  readonly client: Client;
}

/** Every worker slot of the agent is taken by a busy worker. */
export class PoolFullError extends Error {
  constructor(max: number) {
    super(`all ${max} function workers of this host agent are busy`);
    this.name = 'PoolFullError';
  }
}

/** Counters, for tests and the benchmark. */
export interface PoolStats {
  started: number;
  reused: number;
  retired: number;
}

/** A worker being started, and how many invocations already wait for a slot of it. */
interface Starting {
  fn: string;
  key: string;
  slots: number;
  waiting: number;
  worker: Promise<PooledWorker>;
}

/** The pool. */
export class WorkerPool {
  readonly #max: number;
  readonly #idleMs: number;
  readonly #now: () => number;
  readonly #workers = new Set<PooledWorker>();
  readonly #starting = new Set<Starting>();
  /** The current key of each function. */
  readonly #current = new Map<string, string>();
  #closed = false;
  readonly stats: PoolStats = { started: 0, reused: 0, retired: 0 };

  constructor(options: { max: number; idleMs: number; now: () => number }) {
    this.#max = options.max;
    this.#idleMs = options.idleMs;
    this.#now = options.now;
  }

  /**
   * A slot of a worker of `key` for `fn`: a free one of a running worker, of one being started, or of
   * a new worker from `start` (`slots` slots). Makes `key` the function's current key. Throws
   * PoolFullError when no worker can be had; a failed start is thrown to every invocation waiting
   * for that worker.
   */
  async acquire(fn: string, key: string, slots: number, start: () => Promise<FunctionWorker>): Promise<Lease> {
    if (this.#closed) throw new Error('the worker pool is closed');
    if (this.#current.get(fn) !== key) {
      this.#current.set(fn, key);
      this.#retireOthers(fn, key);
    }
    const running = this.#available(fn, key);
    if (running) {
      this.stats.reused++;
      return this.#take(running);
    }
    for (const s of this.#starting) {
      if (s.fn === fn && s.key === key && s.waiting < s.slots) {
        s.waiting++;
        return this.#joined(await s.worker);
      }
    }
    if (this.#workers.size + this.#starting.size >= this.#max && !this.#evictOne()) throw new PoolFullError(this.#max);
    const starting: Starting = { fn, key, slots, waiting: 1, worker: this.#start(fn, key, start) };
    this.#starting.add(starting);
    try {
      return this.#joined(await starting.worker);
    } finally {
      this.#starting.delete(starting);
    }
  }

  /**
   * Gives a slot back after an invocation. A slot that is not `reusable` (its invocation was cut
   * short) retires its worker; a retired, stale or dead worker exits once it has no invocation left;
   * an idle one exits after the idle delay.
   */
  release(lease: Lease, reusable: boolean): void {
    const { pooled } = lease;
    pooled.active--;
    pooled.lastUsed = this.#now();
    if (reusable) pooled.free.push(lease.client);
    else pooled.retired = true;
    if (pooled.retired || this.#closed || !pooled.worker.alive() || this.#current.get(pooled.fn) !== pooled.key) {
      pooled.retired = true;
      if (pooled.active === 0) this.#end(pooled);
      return;
    }
    if (pooled.active === 0) {
      pooled.idleTimer = setTimeout(() => this.#end(pooled), this.#idleMs);
      pooled.idleTimer.unref();
    }
  }

  /** Retires every worker of `fn` (deleted): idle ones now, busy ones after their invocations. */
  retire(fn: string): void {
    this.#current.delete(fn);
    for (const pooled of [...this.#workers]) if (pooled.fn === fn) this.#retire(pooled);
  }

  /** Retires every worker of every function of the project. */
  retireProject(projectId: string): void {
    const prefix = `${projectId}/`;
    for (const fn of [...this.#current.keys()]) if (fn.startsWith(prefix)) this.#current.delete(fn);
    for (const pooled of [...this.#workers]) if (pooled.fn.startsWith(prefix)) this.#retire(pooled);
  }

  /** Workers now: idle (no invocation) and busy, on the whole agent. */
  counts(): { idle: number; busy: number } {
    let busy = 0;
    for (const p of this.#workers) if (p.active > 0) busy++;
    return { idle: this.#workers.size - busy, busy };
  }

  /** The pids of the idle workers of `fn`, or of all (for the benchmark's memory figures and tests). */
  idlePids(fn?: string): number[] {
    return [...this.#workers].filter((p) => p.active === 0 && (fn === undefined || p.fn === fn)).map((p) => p.worker.pid);
  }

  /** Kills every worker and refuses new ones. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#workers].map((p) => p.worker.kill()));
  }

  async #start(fn: string, key: string, start: () => Promise<FunctionWorker>): Promise<PooledWorker> {
    const worker = await start();
    const pooled: PooledWorker = { worker, fn, key, free: [...worker.clients], active: 0, retired: false, lastUsed: this.#now(), idleTimer: undefined };
    this.#workers.add(pooled);
    this.stats.started++;
    void worker.exited.then(() => {
      clearTimeout(pooled.idleTimer);
      this.#workers.delete(pooled);
    });
    if (this.#closed || this.#current.get(fn) !== key) pooled.retired = true;
    return pooled;
  }

  /** A slot of a worker just started for this invocation (it may have died meanwhile: then it throws). */
  #joined(pooled: PooledWorker): Lease {
    if (pooled.free.length === 0) throw new PoolFullError(this.#max);
    return this.#take(pooled);
  }

  #take(pooled: PooledWorker): Lease {
    clearTimeout(pooled.idleTimer);
    pooled.active++;
    pooled.lastUsed = this.#now();
    return { pooled, client: pooled.free.pop()! };
  }

  /** The busiest live worker of `key` with a free slot (packing leaves the others idle to retire). */
  #available(fn: string, key: string): PooledWorker | undefined {
    let best: PooledWorker | undefined;
    for (const p of this.#workers) {
      if (p.fn !== fn || p.key !== key || p.retired || p.free.length === 0 || !p.worker.alive()) continue;
      if (!best || p.active > best.active) best = p;
    }
    return best;
  }

  #retireOthers(fn: string, key: string): void {
    for (const pooled of [...this.#workers]) if (pooled.fn === fn && pooled.key !== key) this.#retire(pooled);
  }

  #retire(pooled: PooledWorker): void {
    pooled.retired = true;
    if (pooled.active === 0) this.#end(pooled);
  }

  /** Ends the least recently used idle worker; false when every worker is busy. */
  #evictOne(): boolean {
    let oldest: PooledWorker | undefined;
    for (const p of this.#workers) if (p.active === 0 && (!oldest || p.lastUsed < oldest.lastUsed)) oldest = p;
    if (!oldest) return false;
    this.#end(oldest);
    return true;
  }

  #end(pooled: PooledWorker): void {
    clearTimeout(pooled.idleTimer);
    if (this.#workers.delete(pooled)) this.stats.retired++;
    void pooled.worker.kill();
  }
}
