/**
 * Functions in tests and benchmarks (docs/functions.md): the modules the suites deploy, a small
 * client over any way of sending a request (the app in process, or a base URL over HTTP), and what
 * the host can tell of a function runtime (a workerd process in the OS sandbox).
 */
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';

/** Sends a request to the service under test. */
export type Send = (request: Request) => Promise<Response>;

/** A sender over HTTP to `base`. */
export function httpSend(base: string): Send {
  return (request) => {
    const url = new URL(request.url);
    return fetch(`${base}${url.pathname}${url.search}`, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      redirect: 'manual',
      ...(request.body ? { duplex: 'half' } : {}),
    } as RequestInit);
  };
}

/** Modules the suites deploy, by what they do. */
export const MODULES = {
  /**
   * Answers 201 with what it received (method, URL and its path, query and origin, headers, body and
   * its length in bytes) and the three service variables.
   */
  echo: `
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const bytes = new Uint8Array(await request.arrayBuffer());
    const body = new TextDecoder().decode(bytes);
    const pick = (e) => ({ PROJECT_ID: e.PROJECT_ID, FUNCTION_NAME: e.FUNCTION_NAME, CLOUD_ORIGIN: e.CLOUD_ORIGIN });
    return Response.json({
      method: request.method, url: request.url, path: url.pathname, query: url.search, origin: url.origin,
      headers: Object.fromEntries(request.headers), body, length: bytes.byteLength, env: pick(env), processEnv: pick(process.env),
    }, { status: 201, headers: { 'x-fn': 'yes', 'set-cookie': 'a=1' } });
  },
};`,
  /** Streams the request body back as the answer. */
  mirror: `export default { fetch(request) { return new Response(request.body, { headers: { 'content-type': 'application/octet-stream' } }); } };`,
  /** Answers `?bytes=N` bytes, generated as they are read. */
  generate: `
export default {
  fetch(request) {
    const total = Number(new URL(request.url).searchParams.get('bytes'));
    const block = new Uint8Array(64 * 1024).fill(97);
    let sent = 0;
    // As in Workers, a stream's length is declared by a FixedLengthStream (a Content-Length header on a stream is not).
    const { readable, writable } = new FixedLengthStream(total);
    void new ReadableStream({
      pull(c) {
        if (sent >= total) return c.close();
        const n = Math.min(block.length, total - sent);
        c.enqueue(block.slice(0, n));
        sent += n;
      },
    }, { highWaterMark: 0 }).pipeTo(writable);
    return new Response(readable);
  },
};`,
  /**
   * Waits `?ms=` then answers `API_KEY` as `env` and `process.env` see it, and which isolate it ran
   * in: an identity made by the isolate's first invocation and kept in module state, which lives as
   * long as the isolate (random values cannot be made at a module's top level, as in Workers).
   */
  sleep: `
let isolate = null;
export default {
  async fetch(request, env) {
    isolate ??= crypto.randomUUID();
    const ms = Number(new URL(request.url).searchParams.get('ms') ?? 0);
    await new Promise((r) => setTimeout(r, ms));
    return Response.json({ env: env.API_KEY ?? null, process: process.env.API_KEY ?? null, isolate });
  },
};`,
  /** With `?loop`, spins forever (its runtime's one thread with it); else waits `?ms=` and answers its isolate, as `sleep`. */
  loop: `
let isolate = null;
export default {
  async fetch(request) {
    isolate ??= crypto.randomUUID();
    const url = new URL(request.url);
    if (url.searchParams.has('loop')) for (;;) {}
    await new Promise((r) => setTimeout(r, Number(url.searchParams.get('ms') ?? 0)));
    return Response.json({ isolate });
  },
};`,
  /** Allocates until it passes its heap limit (memory_mb). */
  hog: `export default { fetch() { const kept = []; for (;;) kept.push(new Array(1e6).fill(Math.random())); } };`,
  /** Every variable of its environment, both ways. */
  env: `export default { fetch(request, env) { return Response.json({ env, process: { ...process.env } }); } };`,
  throws: `export default { fetch() { throw new Error('kaboom'); } };`,
  string: `export default { fetch() { return 'hello'; } };`,
  exits: `export default { fetch() { process.exit(3); } };`,
  /** Answers `ok`: the smallest function, for the benchmark. */
  hello: `export default { fetch() { return new Response('ok'); } };`,
  /** Writes secrets to its console. */
  logs: `
export default {
  fetch(request, env) {
    console.log('token is', env.API_KEY, 'other', env.OTHER_SECRET);
    console.error(new Error('failed with ' + process.env.API_KEY));
    console.log('plain line');
    return new Response('logged');
  },
};`,
  /**
   * Tries what a function must not be able to do; answers what each attempt got. `?dir=` names the
   * agent's state directory, `?token=` a file name to write. The modules a Node program would use
   * (node:fs, node:child_process, node:worker_threads, node:sqlite) are imported at run time, so a
   * runtime that has none of them loads the probe and refuses each attempt.
   */
  probe: `
const attempt = async (f) => { try { const v = await f(); return { ok: true, value: String(v).slice(0, 200) }; } catch (e) { return { ok: false, error: String((e && (e.code || e.name)) || e) }; } };
const load = async (name) => { const m = await import(name); return m.default ?? m; };
const builtin = (name) => { const m = globalThis.process?.getBuiltinModule?.(name); if (!m || Object.keys(m).length === 0) throw new Error('no ' + name); return m; };
export default {
  async fetch(request) {
    const url = new URL(request.url);
    const dir = url.searchParams.get('dir');
    const token = url.searchParams.get('token');
    return Response.json({
      stateDir: await attempt(async () => (await load('node:fs')).readdirSync(dir)),
      stateDirPromises: await attempt(async () => (await load('node:fs/promises')).readdir(dir)),
      stateDirBuiltin: await attempt(() => builtin('node:fs').readdirSync(dir)),
      passwd: await attempt(async () => (await load('node:fs')).readFileSync('/etc/passwd', 'utf8')),
      passwdPromises: await attempt(async () => (await load('node:fs/promises')).readFile('/etc/passwd', 'utf8')),
      procSelf: await attempt(async () => (await load('node:fs/promises')).readFile('/proc/self/status', 'utf8')),
      write: await attempt(async () => (await load('node:fs')).writeFileSync('/tmp/' + token, 'x')),
      // Workers' /tmp is the isolate's own, in memory: a write there may succeed, and must reach no disk.
      writeTmp: await attempt(async () => (await load('node:fs/promises')).writeFile('/tmp/' + token, 'x')),
      writeState: await attempt(async () => (await load('node:fs/promises')).writeFile(dir + '/' + token, 'x')),
      sqlite: await attempt(async () => new (await load('node:sqlite')).DatabaseSync(dir + '/' + token + '.db')),
      spawn: await attempt(async () => { const r = (await load('node:child_process')).spawnSync('/bin/true'); if (r.error) throw r.error; return r.status; }),
      spawnBuiltin: await attempt(() => builtin('node:child_process').spawnSync('/bin/true').status),
      worker: await attempt(async () => new (await load('node:worker_threads')).Worker('1', { eval: true })),
      kill: await attempt(() => process.kill(process.pid, 0)),
      agentSettings: Object.keys(globalThis.process?.env ?? {}).filter((k) => k.startsWith('SVCD_') || k === 'PATH' || k === 'HOME'),
    });
  },
};`,
} as const;

/** A function client over `send`, authenticated with `auth` unless told otherwise. */
export class FunctionsClient {
  readonly #send: Send;
  constructor(send: Send) {
    this.#send = send;
  }

  /** Any request to `path`, with a bearer when `auth` is given. */
  call(method: string, path: string, auth?: string | null, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (auth) headers.set('authorization', `Bearer ${auth}`);
    const body = init.body ?? null;
    return this.#send(new Request(`http://svc.test${path}`, { ...init, method, headers, body, ...(body instanceof ReadableStream ? { duplex: 'half' } : {}) } as RequestInit));
  }

  /** Deploys `source` as function `name` of project `p` (`query`: `?timeout_ms=…`). */
  deploy(auth: string, p: string, name: string, source: string, query = ''): Promise<Response> {
    return this.call('PUT', `/v0/projects/${p}/functions/${name}${query}`, auth, { headers: { 'content-type': 'application/javascript' }, body: source });
  }

  /** Deploys and expects success; answers the function record. */
  async deployed(auth: string, p: string, name: string, source: string, query = ''): Promise<Record<string, unknown>> {
    const r = await this.deploy(auth, p, name, source, query);
    if (r.status !== 200 && r.status !== 201) throw new Error(`deploy ${name}: ${r.status} ${await r.text()}`);
    return (await r.json()) as Record<string, unknown>;
  }

  /** Invokes function `name` of `p` at `/invoke{rest}`. */
  invoke(auth: string | null, p: string, name: string, rest = '', init: RequestInit = {}): Promise<Response> {
    return this.call(init.method ?? 'GET', `/v0/projects/${p}/functions/${name}/invoke${rest}`, auth, init);
  }
}

/** The error envelope of an answer. */
export async function errorOf(r: Response): Promise<{ code: string; message: string }> {
  return ((await r.json()) as { error: { code: string; message: string } }).error;
}

/** One runtime as `FunctionRuntime.runtimeState()` lists it. */
export interface RuntimeEntry {
  projectId: string;
  memoryMb: number;
  pid: number;
  active: number;
}

/** What `runtimeState()` answers. */
export interface RuntimeState {
  runtimes: RuntimeEntry[];
  started: number;
  reused: number;
  exited: number;
  egress: { passed: number; refused: number };
}

/** The live runtimes of `projectId` (of `memoryMb` when given). */
export function runtimesOf(state: RuntimeState, projectId: string, memoryMb?: number): RuntimeEntry[] {
  return state.runtimes.filter((r) => r.projectId === projectId && (memoryMb === undefined || r.memoryMb === memoryMb));
}

/** The command name of `pid` ('' once it is gone). */
export function commOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/** The children of `pid` (from /proc/<pid>/task/<tid>/children). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tasks) {
    try {
      for (const c of readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ')) if (c.trim()) out.push(Number(c));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/**
 * The workerd process of the runtime `pid` names: `pid` itself when it is workerd (no OS layer), else
 * the one workerd among its descendants (the OS layer's namespace holder is its parent). Null when
 * there is none.
 */
export function workerdOf(pid: number): number | null {
  const seen: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const next = queue.shift()!;
    if (commOf(next) === 'workerd') seen.push(next);
    queue.push(...childrenOf(next));
  }
  return seen.length === 1 ? seen[0]! : null;
}

/** A field of /proc/<pid>/status, split on white space (`Uid` answers real, effective, saved and file-system uids). */
export function statusField(pid: number, field: string): string[] {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(`${field}:`));
  if (line === undefined) throw new Error(`no ${field} in /proc/${pid}/status`);
  return line.slice(field.length + 1).trim().split(/\s+/).filter(Boolean);
}

/** The namespace `kind` (net, mnt, pid, ipc, uts, …) of `pid`, as its /proc link names it (`net:[4026531833]`). */
export function namespaceOf(pid: number | 'self', kind: string): string {
  return readlinkSync(`/proc/${pid}/ns/${kind}`);
}

/** The cgroup paths of `pid` by controller (`memory`, `cpu`, … on v1; `` for the v2 hierarchy). */
export function cgroupsOf(pid: number): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n')) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    for (const controller of m[1]!.split(',')) out.set(controller, m[2]!);
  }
  return out;
}

/** The file `v1` of controller `controller` (cgroup v1), or `v2` (the unified hierarchy), of the group `pid` is in; null when there is none. */
function cgroupFile(pid: number, controller: string, v1: string, v2: string): string | null {
  const groups = cgroupsOf(pid);
  const own = groups.get(controller);
  const file = own !== undefined ? join('/sys/fs/cgroup', controller, own, v1) : join('/sys/fs/cgroup', groups.get('') ?? '/', v2);
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : null;
}

/** The memory limit of the cgroup `pid` is in, bytes (v1 `memory.limit_in_bytes`, v2 `memory.max`); null when unlimited or unknown. */
export function cgroupMemoryLimit(pid: number): number | null {
  const text = cgroupFile(pid, 'memory', 'memory.limit_in_bytes', 'memory.max');
  return text === null || text === 'max' || Number(text) >= 2 ** 62 ? null : Number(text);
}

/** The CPU quota of the cgroup `pid` is in, in percent of one core; null when unlimited or unknown. */
export function cgroupCpuPercent(pid: number): number | null {
  const groups = cgroupsOf(pid);
  if (groups.has('cpu')) {
    const quota = Number(cgroupFile(pid, 'cpu', 'cpu.cfs_quota_us', '') ?? -1);
    const period = Number(cgroupFile(pid, 'cpu', 'cpu.cfs_period_us', '') ?? 0);
    return quota > 0 && period > 0 ? (quota / period) * 100 : null;
  }
  const [quota, period] = (cgroupFile(pid, 'cpu', '', 'cpu.max') ?? 'max').split(' ');
  return quota === 'max' || !period ? null : (Number(quota) / Number(period)) * 100;
}

/** The task limit of the cgroup `pid` is in; null when unlimited or unknown (no pids controller). */
export function cgroupPidsMax(pid: number): number | null {
  const text = cgroupFile(pid, 'pids', 'pids.max', 'pids.max');
  return text === null || text === 'max' ? null : Number(text);
}
