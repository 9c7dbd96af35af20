/**
 * The worker pool of this agent (docs/functions.md "Workers"). A worker serves one invocation at a
 * time and is pooled by its key — the function's version, its project's secret set, and the origin
 * its environment names — so a warm worker only ever serves invocations that would have started it
 * exactly as it is. A function has one current key: when a deploy or a secret change gives it a new
 * one, its idle workers of any other key exit at once and its busy ones finish their invocation
 * untouched, then exit.
 *
 * Bounds: `max` workers on the agent (starting ones included); past it, the least recently used idle
 * worker of any function makes room, and when every worker is busy the invocation is refused (the
 * caller answers 429 `function_busy`). An idle worker exits after `idleMs`.
 */
import type { FunctionWorker } from './worker.ts';

/** A worker in the pool. */
export interface PooledWorker {
  readonly worker: FunctionWorker;
  /** `<project>/<name>` of the function it runs. */
  readonly fn: string;
  readonly key: string;
  busy: boolean;
  /** Exits once its current invocation is done. */
  retired: boolean;
  lastUsed: number;
  idleTimer: NodeJS.Timeout | undefined;
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

/** The pool. */
export class WorkerPool {
  readonly #max: number;
  readonly #idleMs: number;
  readonly #now: () => number;
  readonly #workers = new Set<PooledWorker>();
  /** The current key of each function. */
  readonly #current = new Map<string, string>();
  #starting = 0;
  #closed = false;
  readonly stats: PoolStats = { started: 0, reused: 0, retired: 0 };

  constructor(options: { max: number; idleMs: number; now: () => number }) {
    this.#max = options.max;
    this.#idleMs = options.idleMs;
    this.#now = options.now;
  }

  /**
   * An idle worker of `key` for `fn`, marked busy, or a new one from `start`. Makes `key` the
   * function's current key. Throws PoolFullError when no slot can be had.
   */
  async acquire(fn: string, key: string, start: () => Promise<FunctionWorker>): Promise<PooledWorker> {
    if (this.#closed) throw new Error('the worker pool is closed');
    if (this.#current.get(fn) !== key) {
      this.#current.set(fn, key);
      this.#retireOthers(fn, key);
    }
    for (const pooled of this.#workers) {
      if (pooled.fn === fn && pooled.key === key && !pooled.busy && !pooled.retired && pooled.worker.alive()) {
        clearTimeout(pooled.idleTimer);
        pooled.busy = true;
        pooled.lastUsed = this.#now();
        this.stats.reused++;
        return pooled;
      }
    }
    if (this.#workers.size + this.#starting >= this.#max && !this.#evictOne()) throw new PoolFullError(this.#max);
    this.#starting++;
    let worker: FunctionWorker;
    try {
      worker = await start();
    } finally {
      this.#starting--;
    }
    const pooled: PooledWorker = { worker, fn, key, busy: true, retired: false, lastUsed: this.#now(), idleTimer: undefined };
    this.#workers.add(pooled);
    this.stats.started++;
    void worker.exited.then(() => this.#remove(pooled));
    if (this.#closed || this.#current.get(fn) !== key) pooled.retired = true;
    return pooled;
  }

  /** Gives a worker back after an invocation: kept idle when `reusable`, current and alive, else ended. */
  release(pooled: PooledWorker, reusable: boolean): void {
    pooled.busy = false;
    pooled.lastUsed = this.#now();
    if (!reusable || pooled.retired || this.#closed || !pooled.worker.alive() || this.#current.get(pooled.fn) !== pooled.key) {
      this.#end(pooled);
      return;
    }
    pooled.idleTimer = setTimeout(() => this.#end(pooled), this.#idleMs);
    pooled.idleTimer.unref();
  }

  /** Retires every worker of `fn` (deleted): idle ones now, busy ones after their invocation. */
  retire(fn: string): void {
    this.#current.delete(fn);
    for (const pooled of [...this.#workers]) {
      if (pooled.fn !== fn) continue;
      pooled.retired = true;
      if (!pooled.busy) this.#end(pooled);
    }
  }

  /** Retires every worker of every function of the project. */
  retireProject(projectId: string): void {
    const prefix = `${projectId}/`;
    for (const fn of new Set([...this.#workers].map((p) => p.fn))) if (fn.startsWith(prefix)) this.retire(fn);
    for (const fn of [...this.#current.keys()]) if (fn.startsWith(prefix)) this.#current.delete(fn);
  }

  /** Workers now: idle and busy, per the whole agent. */
  counts(): { idle: number; busy: number } {
    let busy = 0;
    for (const p of this.#workers) if (p.busy) busy++;
    return { idle: this.#workers.size - busy, busy };
  }

  /** The pids of the idle workers of `fn` (for the benchmark's memory figures and tests). */
  idlePids(fn?: string): number[] {
    return [...this.#workers].filter((p) => !p.busy && (fn === undefined || p.fn === fn)).map((p) => p.worker.pid);
  }

  /** Kills every worker and refuses new ones. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#workers].map((p) => p.worker.kill()));
  }

  #retireOthers(fn: string, key: string): void {
    for (const pooled of [...this.#workers]) {
      if (pooled.fn !== fn || pooled.key === key) continue;
      pooled.retired = true;
      if (!pooled.busy) this.#end(pooled);
    }
  }

  /** Ends the least recently used idle worker; false when every worker is busy. */
  #evictOne(): boolean {
    let oldest: PooledWorker | undefined;
    for (const p of this.#workers) if (!p.busy && (!oldest || p.lastUsed < oldest.lastUsed)) oldest = p;
    if (!oldest) return false;
    this.#end(oldest);
    return true;
  }

  #end(pooled: PooledWorker): void {
    clearTimeout(pooled.idleTimer);
    if (this.#workers.delete(pooled)) this.stats.retired++;
    void pooled.worker.kill();
  }

  #remove(pooled: PooledWorker): void {
    clearTimeout(pooled.idleTimer);
    this.#workers.delete(pooled);
  }
}
