/**
 * The function runtimes of this agent (docs/functions.md "Runtimes"): one workerd process per project
 * and memory setting, started on the first invocation that needs it, as each project has one engine.
 * All of a project's functions with the same `memory_mb` share it, each version in an isolate of its
 * own; a project whose functions differ in `memory_mb` has one runtime per value, because the heap
 * limit is the process's (an isolate past it ends its whole process).
 *
 * Bounds: at most `max` runtimes on the agent (starting ones included); past it the least recently
 * used idle runtime of any project makes room, and when every runtime is busy the start is refused
 * (HostFullError). An idle runtime exits after `idleMs`. A runtime that exits (killed after a
 * timeout, past its memory) is forgotten at once: the next invocation starts a fresh one.
 *
 * Recycling (docs/functions.md "Memory"): workerd keeps the memory its allocator took under load, so
 * a runtime's resident memory grows with the request rate it has seen. When an invocation ends, a
 * runtime is asked `recycle.when` (at most once per `recycle.everyMs`); once it says so, the runtime
 * takes no new invocations — the next one starts a fresh runtime — and is ended when its last
 * invocation in flight has ended (draining, not counted against `max`).
 */
import type { ProjectRuntime } from './project-runtime.ts';

/** Every runtime of the agent is busy and none can be added. */
export class HostFullError extends Error {
  constructor(max: number) {
    super(`all ${max} function runtimes of this host agent are busy`);
    this.name = 'HostFullError';
  }
}

interface Entry {
  readonly key: string;
  readonly projectId: string;
  readonly memoryMb: number;
  readonly runtime: Promise<ProjectRuntime>;
  /** Set once started. */
  started: ProjectRuntime | null;
  active: number;
  lastUsed: number;
  idleTimer: NodeJS.Timeout | undefined;
  /** When `recycle.when` was last asked about it. */
  checkedAt: number;
  /** Recycled: taking no new invocations, ended once its last one ends. */
  draining: boolean;
}

/** When runtimes are recycled: asked after an invocation ends, at most once per `everyMs` per runtime. */
export interface RecyclePolicy {
  everyMs: number;
  when(runtime: ProjectRuntime): boolean;
}

/** A runtime held for one invocation (or one deploy's check). */
export interface Held {
  readonly runtime: ProjectRuntime;
  release(): void;
}

/** The runtimes. */
export class Runtimes {
  readonly #max: number;
  readonly #idleMs: number;
  readonly #now: () => number;
  readonly #start: (projectId: string, memoryMb: number) => Promise<ProjectRuntime>;
  readonly #recycle: RecyclePolicy | undefined;
  readonly #entries = new Map<string, Entry>();
  /** Recycled runtimes with invocations still in flight. */
  readonly #draining = new Set<Entry>();
  #closed = false;
  /** Counters, for tests and the benchmark. */
  readonly stats = { started: 0, reused: 0, exited: 0, recycled: 0 };

  constructor(options: { max: number; idleMs: number; now: () => number; start: (projectId: string, memoryMb: number) => Promise<ProjectRuntime>; recycle?: RecyclePolicy }) {
    this.#max = options.max;
    this.#idleMs = options.idleMs;
    this.#now = options.now;
    this.#start = options.start;
    this.#recycle = options.recycle;
  }

  /** The project's runtime for `memoryMb`, started when there is none; release it when done. */
  async acquire(projectId: string, memoryMb: number): Promise<Held> {
    if (this.#closed) throw new Error('the function runtimes are closed');
    const key = `${projectId}:${memoryMb}`;
    let entry = this.#entries.get(key);
    if (entry) this.stats.reused++;
    else {
      if (this.#entries.size >= this.#max && !this.#evictOne()) throw new HostFullError(this.#max);
      entry = this.#begin(key, projectId, memoryMb);
    }
    clearTimeout(entry.idleTimer);
    entry.active++;
    entry.lastUsed = this.#now();
    let runtime: ProjectRuntime;
    try {
      runtime = await entry.runtime;
    } catch (err) {
      entry.active--;
      throw err;
    }
    const held = entry;
    let released = false;
    return {
      runtime,
      release: () => {
        if (released) return;
        released = true;
        this.#release(held);
      },
    };
  }

  /** One invocation of `entry` ended: recycled when its policy says so, idle-timed when it was the last. */
  #release(entry: Entry): void {
    entry.active--;
    entry.lastUsed = this.#now();
    if (!entry.draining && this.#recycle && entry.started && entry.lastUsed - entry.checkedAt >= this.#recycle.everyMs) {
      entry.checkedAt = entry.lastUsed;
      if (this.#recycle.when(entry.started)) {
        entry.draining = true;
        this.stats.recycled++;
        this.#forget(entry);
        this.#draining.add(entry);
      }
    }
    if (entry.active > 0) return;
    if (entry.draining) this.#end(entry);
    else if (this.#entries.get(entry.key) === entry) {
      entry.idleTimer = setTimeout(() => this.#end(entry), this.#idleMs);
      entry.idleTimer.unref();
    }
  }

  /** Ends `runtime` now (a function stuck past its timeout); invocations on it fail. */
  async kill(runtime: ProjectRuntime): Promise<void> {
    for (const entry of this.#entries.values()) if (entry.started === runtime) this.#forget(entry);
    await runtime.kill();
  }

  /** Ends every runtime of the project (deleted): at once, its invocations were refused before. */
  retireProject(projectId: string): void {
    for (const entry of [...this.#entries.values(), ...this.#draining]) if (entry.projectId === projectId) this.#end(entry);
  }

  /** The live runtimes: project, memory, pid, invocations in flight (tests, the benchmark, metrics). */
  list(): { projectId: string; memoryMb: number; pid: number; active: number }[] {
    const out = [];
    for (const e of this.#entries.values()) if (e.started) out.push({ projectId: e.projectId, memoryMb: e.memoryMb, pid: e.started.pid, active: e.active });
    return out;
  }

  /** Kills every runtime and refuses new ones. */
  async close(): Promise<void> {
    this.#closed = true;
    const all = [...this.#entries.values(), ...this.#draining];
    this.#entries.clear();
    this.#draining.clear();
    await Promise.all(all.map(async (e) => (await e.runtime.catch(() => null))?.kill()));
  }

  #begin(key: string, projectId: string, memoryMb: number): Entry {
    const entry: Entry = {
      key,
      projectId,
      memoryMb,
      runtime: this.#start(projectId, memoryMb),
      started: null,
      active: 0,
      lastUsed: this.#now(),
      idleTimer: undefined,
      checkedAt: this.#now(),
      draining: false,
    };
    this.#entries.set(key, entry);
    entry.runtime.then(
      (runtime) => {
        entry.started = runtime;
        this.stats.started++;
        void runtime.exited.then(() => {
          this.stats.exited++;
          this.#forget(entry);
        });
        if (this.#closed || this.#entries.get(key) !== entry) void runtime.kill();
      },
      () => this.#forget(entry),
    );
    return entry;
  }

  #forget(entry: Entry): void {
    clearTimeout(entry.idleTimer);
    if (this.#entries.get(entry.key) === entry) this.#entries.delete(entry.key);
    this.#draining.delete(entry);
  }

  #end(entry: Entry): void {
    this.#forget(entry);
    void entry.runtime.then((r) => r.kill()).catch(() => {});
  }

  /** Ends the least recently used idle runtime; false when every runtime is busy. */
  #evictOne(): boolean {
    let oldest: Entry | undefined;
    for (const e of this.#entries.values()) if (e.active === 0 && e.started && (!oldest || e.lastUsed < oldest.lastUsed)) oldest = e;
    if (!oldest) return false;
    this.#end(oldest);
    return true;
  }
}
