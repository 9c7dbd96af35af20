/**
 * The agent's set of function runtimes (./runtimes.ts) over a fake start: one runtime per project
 * and memory_mb, shared by concurrent invocations and by a burst of cold ones; the bound on their
 * number (the least recently used idle one makes room, 429 when all are busy); the idle exit; a
 * runtime killed, exited on its own or failing to start is forgotten at once; a deleted project's
 * runtimes end; close; recycling (a runtime past its bound takes no new invocation and ends once
 * the last one in flight has ended).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ProjectRuntime, RuntimeExit } from './project-runtime.ts';
import { HostFullError, Runtimes, type RecyclePolicy } from './runtimes.ts';

/** A runtime as Runtimes uses one: its pid, its exit, kill. */
interface Fake {
  runtime: ProjectRuntime;
  projectId: string;
  memoryMb: number;
  pid: number;
  kills: number;
  /** Makes it exit on its own. */
  exit(exit?: Partial<RuntimeExit>): void;
}

const IDLE_MS = 1000;

let clock = 0;
let nextPid = 1000;
let fakes: Fake[];
/** How the next start ends: by default at once, with a fresh fake. */
let starts: ((projectId: string, memoryMb: number) => Promise<ProjectRuntime>) | null;

function fake(projectId: string, memoryMb: number): Fake {
  let resolveExit!: (exit: RuntimeExit) => void;
  const exited = new Promise<RuntimeExit>((r) => (resolveExit = r));
  let done = false;
  const f: Fake = {
    projectId,
    memoryMb,
    pid: nextPid++,
    kills: 0,
    exit(exit = {}) {
      if (done) return;
      done = true;
      resolveExit({ code: null, signal: null, heapLimit: false, oomKilled: false, ...exit });
    },
    runtime: undefined as unknown as ProjectRuntime,
  };
  f.runtime = {
    pid: f.pid,
    projectId,
    memoryMb,
    exited,
    kill: async () => {
      f.kills++;
      f.exit({ signal: 'SIGKILL' });
      await exited;
    },
  } as unknown as ProjectRuntime;
  fakes.push(f);
  return f;
}

function runtimes(max = 3, recycle?: RecyclePolicy): Runtimes {
  return new Runtimes({
    max,
    idleMs: IDLE_MS,
    now: () => clock,
    start: (projectId, memoryMb) => (starts ? starts(projectId, memoryMb) : Promise.resolve(fake(projectId, memoryMb).runtime)),
    ...(recycle ? { recycle } : {}),
  });
}

const fakeOf = (runtime: ProjectRuntime) => fakes.find((f) => f.runtime === runtime)!;
/** Lets promise callbacks run. */
const settle = () => vi.advanceTimersByTimeAsync(0);

beforeEach(() => {
  vi.useFakeTimers();
  clock = 0;
  fakes = [];
  starts = null;
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Runtimes', () => {
  it('starts one runtime per project and memory_mb, and serves every later invocation of that pair with it', async () => {
    const set = runtimes();
    const a = await set.acquire('prj_a', 128);
    const b = await set.acquire('prj_a', 128);
    expect(b.runtime).toBe(a.runtime);
    const small = await set.acquire('prj_a', 64);
    const other = await set.acquire('prj_b', 128);
    expect(new Set([a.runtime, small.runtime, other.runtime]).size).toBe(3);
    expect(fakes.map((f) => [f.projectId, f.memoryMb])).toEqual([
      ['prj_a', 128],
      ['prj_a', 64],
      ['prj_b', 128],
    ]);
    expect(set.stats).toEqual({ started: 3, reused: 1, exited: 0, recycled: 0 });
    expect(set.list().map(({ projectId, memoryMb, active }) => ({ projectId, memoryMb, active }))).toEqual([
      { projectId: 'prj_a', memoryMb: 128, active: 2 },
      { projectId: 'prj_a', memoryMb: 64, active: 1 },
      { projectId: 'prj_b', memoryMb: 128, active: 1 },
    ]);
    expect(set.list()[0]!.pid).toBe(fakeOf(a.runtime).pid);
  });

  it('starts one runtime for a burst of cold invocations, and lists it only once started', async () => {
    let finish!: () => void;
    starts = (projectId, memoryMb) => new Promise((resolve) => (finish = () => resolve(fake(projectId, memoryMb).runtime)));
    const set = runtimes();
    const burst = Array.from({ length: 5 }, () => set.acquire('prj_a', 128));
    await settle();
    expect(set.list()).toEqual([]);
    finish();
    const held = await Promise.all(burst);
    expect(new Set(held.map((h) => h.runtime)).size).toBe(1);
    expect(fakes).toHaveLength(1);
    expect(set.list()[0]!.active).toBe(5);
    expect(set.stats).toMatchObject({ started: 1, reused: 4 });
  });

  it('counts releases once each, and ends a runtime idle for idleMs', async () => {
    const set = runtimes();
    const a = await set.acquire('prj_a', 128);
    const b = await set.acquire('prj_a', 128);
    a.release();
    a.release();
    expect(set.list()[0]!.active).toBe(1);
    b.release();
    expect(set.list()[0]!.active).toBe(0);
    await vi.advanceTimersByTimeAsync(IDLE_MS - 1);
    expect(fakeOf(a.runtime).kills).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(fakeOf(a.runtime).kills).toBe(1);
    expect(set.list()).toEqual([]);
    // The next invocation starts a fresh one.
    const c = await set.acquire('prj_a', 128);
    expect(c.runtime).not.toBe(a.runtime);
    expect(set.stats).toMatchObject({ started: 2, exited: 1 });
  });

  it('keeps a runtime used again before its idle time ran out', async () => {
    const set = runtimes();
    const a = await set.acquire('prj_a', 128);
    a.release();
    await vi.advanceTimersByTimeAsync(IDLE_MS - 10);
    const b = await set.acquire('prj_a', 128);
    await vi.advanceTimersByTimeAsync(IDLE_MS * 5);
    expect(fakeOf(a.runtime).kills).toBe(0);
    expect(b.runtime).toBe(a.runtime);
    b.release();
    await vi.advanceTimersByTimeAsync(IDLE_MS);
    expect(fakeOf(a.runtime).kills).toBe(1);
  });

  it('at its bound, ends the least recently used idle runtime of any project to start another', async () => {
    const set = runtimes(2);
    clock = 1;
    const a = await set.acquire('prj_a', 128);
    clock = 2;
    a.release();
    clock = 3;
    const b = await set.acquire('prj_b', 128);
    clock = 4;
    b.release();
    // prj_a used again: prj_b is now the least recently used.
    clock = 5;
    const a2 = await set.acquire('prj_a', 128);
    clock = 6;
    a2.release();
    clock = 7;
    const c = await set.acquire('prj_c', 128);
    expect(fakeOf(b.runtime).kills).toBe(1);
    expect(fakeOf(a.runtime).kills).toBe(0);
    expect(set.list().map((r) => r.projectId)).toEqual(['prj_a', 'prj_c']);
    expect(c.runtime).not.toBe(b.runtime);
  });

  it('refuses a new runtime when every runtime is busy, a starting one included (HostFullError), and starts it once one is idle', async () => {
    let finish!: () => void;
    const set = runtimes(2);
    const a = await set.acquire('prj_a', 128);
    starts = (projectId, memoryMb) => new Promise((resolve) => (finish = () => resolve(fake(projectId, memoryMb).runtime)));
    const starting = set.acquire('prj_b', 128);
    await settle();
    const refused = set.acquire('prj_c', 128);
    await expect(refused).rejects.toBeInstanceOf(HostFullError);
    await expect(refused).rejects.toThrow('all 2 function runtimes of this host agent are busy');
    // The busy pairs are still served.
    expect((await set.acquire('prj_a', 128)).runtime).toBe(a.runtime);
    finish();
    const b = await starting;
    starts = null;
    await expect(set.acquire('prj_c', 64)).rejects.toBeInstanceOf(HostFullError);
    b.release();
    const c = await set.acquire('prj_c', 128);
    expect(fakeOf(b.runtime).kills).toBe(1);
    expect(fakeOf(a.runtime).kills).toBe(0);
    expect(set.list().map((r) => r.projectId).sort()).toEqual(['prj_a', 'prj_c']);
    c.release();
  });

  it('forgets a killed runtime at once: the next invocation starts a fresh one, and releases of the old one touch nothing', async () => {
    const set = runtimes();
    const a = await set.acquire('prj_a', 128);
    const beside = await set.acquire('prj_a', 128);
    await set.kill(a.runtime);
    expect(fakeOf(a.runtime).kills).toBe(1);
    expect(set.list()).toEqual([]);
    const b = await set.acquire('prj_a', 128);
    expect(b.runtime).not.toBe(a.runtime);
    a.release();
    beside.release();
    // The fresh one is busy: no idle timer of the old one ends it.
    await vi.advanceTimersByTimeAsync(IDLE_MS * 3);
    expect(fakeOf(b.runtime).kills).toBe(0);
    expect(set.list().map((r) => [r.pid, r.active])).toEqual([[fakeOf(b.runtime).pid, 1]]);
  });

  it('forgets a runtime that exits on its own (past its memory), counting it', async () => {
    const set = runtimes();
    const a = await set.acquire('prj_a', 128);
    fakeOf(a.runtime).exit({ signal: 'SIGABRT', heapLimit: true });
    await settle();
    expect(set.list()).toEqual([]);
    expect(set.stats.exited).toBe(1);
    a.release();
    const b = await set.acquire('prj_a', 128);
    expect(b.runtime).not.toBe(a.runtime);
  });

  it('rejects every waiter of a start that fails, and tries again at the next invocation', async () => {
    starts = () => Promise.reject(new Error('no workerd'));
    const set = runtimes(1);
    const waiters = [set.acquire('prj_a', 128), set.acquire('prj_a', 128)];
    for (const w of waiters) await expect(w).rejects.toThrow('no workerd');
    expect(set.list()).toEqual([]);
    // Its place is free again (the bound is 1).
    starts = null;
    const b = await set.acquire('prj_b', 128);
    expect(set.list().map((r) => [r.projectId, r.active])).toEqual([['prj_b', 1]]);
    b.release();
    expect(set.stats.started).toBe(1);
  });

  it('ends every runtime of a deleted project at once, busy or not, and no other project\'s', async () => {
    let finish!: () => void;
    const set = runtimes(5);
    const busy = await set.acquire('prj_a', 128);
    const idle = await set.acquire('prj_a', 64);
    idle.release();
    const other = await set.acquire('prj_b', 128);
    starts = (projectId, memoryMb) => new Promise((resolve) => (finish = () => resolve(fake(projectId, memoryMb).runtime)));
    const starting = set.acquire('prj_a', 32);
    await settle();
    set.retireProject('prj_a');
    await settle();
    expect(fakeOf(busy.runtime).kills).toBe(1);
    expect(fakeOf(idle.runtime).kills).toBe(1);
    expect(fakeOf(other.runtime).kills).toBe(0);
    expect(set.list().map((r) => r.projectId)).toEqual(['prj_b']);
    // The one still starting is killed once started (kill is idempotent: it may be asked twice).
    finish();
    const late = await starting;
    await settle();
    expect(fakeOf(late.runtime).kills).toBeGreaterThanOrEqual(1);
    expect(set.list().map((r) => r.projectId)).toEqual(['prj_b']);
  });

  it('kills every runtime at close and refuses new ones', async () => {
    const set = runtimes();
    const a = await set.acquire('prj_a', 128);
    const b = await set.acquire('prj_b', 128);
    b.release();
    await set.close();
    expect(fakes.map((f) => f.kills)).toEqual([1, 1]);
    await expect(set.acquire('prj_a', 128)).rejects.toThrow(/closed/);
    a.release();
    expect(set.list()).toEqual([]);
  });

  it('recycles a runtime its policy names when an invocation ends: new invocations go to a fresh one, the old one ends once drained', async () => {
    const bloated = new Set<ProjectRuntime>();
    const asked: ProjectRuntime[] = [];
    const set = runtimes(1, { everyMs: 1000, when: (runtime) => (asked.push(runtime), bloated.has(runtime)) });
    const a = await set.acquire('prj_a', 128);
    const b = await set.acquire('prj_a', 128);
    clock = 1000;
    a.release();
    expect(asked).toEqual([a.runtime]);
    bloated.add(a.runtime);
    // Asked at most once per everyMs.
    const c = await set.acquire('prj_a', 128);
    c.release();
    expect(asked).toHaveLength(1);
    clock = 2000;
    const d = await set.acquire('prj_a', 128);
    expect(d.runtime).toBe(a.runtime);
    d.release();
    expect(asked).toHaveLength(2);
    expect(set.stats.recycled).toBe(1);
    // Draining: out of the list and of the bound, still serving what it holds.
    expect(set.list()).toEqual([]);
    const fresh = await set.acquire('prj_a', 128);
    expect(fresh.runtime).not.toBe(a.runtime);
    expect(fakeOf(a.runtime).kills).toBe(0);
    b.release();
    await settle();
    expect(fakeOf(a.runtime).kills).toBe(1);
    expect(fakeOf(fresh.runtime).kills).toBe(0);
    expect(set.list().map((r) => r.pid)).toEqual([fakeOf(fresh.runtime).pid]);
    fresh.release();
  });

  it('ends a draining runtime with its project, and at close', async () => {
    const set = runtimes(3, { everyMs: 0, when: () => true });
    const a = await set.acquire('prj_a', 128);
    const b = await set.acquire('prj_a', 128);
    a.release();
    expect(set.stats.recycled).toBe(1);
    set.retireProject('prj_a');
    await settle();
    expect(fakeOf(b.runtime).kills).toBe(1);
    const c = await set.acquire('prj_b', 128);
    const d = await set.acquire('prj_b', 128);
    c.release();
    await set.close();
    expect(fakeOf(d.runtime).kills).toBe(1);
  });
});
