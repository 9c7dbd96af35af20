/**
 * One function runtime of a project (docs/functions.md "Runtimes"): a workerd process, inside the OS
 * layer of ./sandbox.ts, whose supervisor (./supervisor.js) runs each of the project's function
 * versions in an isolate of its own. The agent serves it two unix sockets in its `out/` directory —
 * the control socket (`GET /targets/<id>`: a version's module, environment and origin) and the egress
 * filter (./egress.ts) — and reaches it through its own socket in `in/`.
 *
 * Its directory, `functions/.runtimes/<n>/` under `SVCD_ROOT` (a short number: its sockets' paths
 * must fit a unix socket's 107 bytes), holds `root/` (the mount
 * point of its root), `cfg/` (config.capnp and supervisor.js), `in/` and `out/`; it is removed when
 * the runtime has exited, and a start of the agent removes what a crash left.
 */
import type { ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import type { Cgroup, CgroupHost, CgroupLimits } from '../sandbox/cgroups.ts';
import { keepAnswersConnect } from '../../shared/http/forward.ts';
import type { EgressFilter } from './egress.ts';
import { closeAll, spawnWorkerd, workerdPid, type RuntimeExit } from './runtime-process.ts';
import { insidePaths, launchArgv, type SandboxMode, type SandboxTools } from './sandbox.ts';
import { FUNCTION_COMPATIBILITY_DATE, FUNCTION_COMPATIBILITY_FLAGS, runtimeConfig } from './workerd-config.ts';

/** The supervisor's source, copied into each runtime's configuration directory. */
const SUPERVISOR = fileURLToPath(new URL('./supervisor.js', import.meta.url));

/** What the control socket answers for a target: one function version with its environment. */
export interface TargetSpec {
  /** The module file on this agent. */
  modulePath: string;
  env: Readonly<Record<string, string>>;
  origin: string;
}

export type { RuntimeExit } from './runtime-process.ts';

/** Why the runtime could not be started at all (the binary, the sandbox): 503 `function_runtime_missing`. */
export class RuntimeStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RuntimeStartError';
  }
}

/** What a start needs. */
export interface RuntimeOptions {
  /** Unique among this agent's runtimes: `<project>-m<memory>-<n>`. */
  id: string;
  projectId: string;
  memoryMb: number;
  mode: SandboxMode;
  workerd: string;
  tools: SandboxTools | null;
  /** The uid (and gid) it runs as with the OS layer. */
  uid: number;
  /** `functions/.runtimes/<n>` under `SVCD_ROOT`. */
  dir: string;
  cgroups: CgroupHost | null;
  cgroupName: string;
  limits: CgroupLimits;
  egress: EgressFilter;
  startTimeoutMs: number;
  /** A line the runtime wrote: of a target's function (its console, or the supervisor about it), or of the runtime itself (target null). */
  onLine(target: string | null, stream: 'stdout' | 'stderr' | 'agent', text: string): void;
}

/** The longest path a unix socket may have on Linux (`sun_path` holds 108 bytes with its NUL). */
const UNIX_PATH_MAX = 107;

/** A running runtime. */
export class ProjectRuntime {
  readonly id: string;
  readonly projectId: string;
  readonly memoryMb: number;
  /** The pid of its workerd process (with the OS layer, the child of the namespaces' holder). */
  pid: number;
  /** The pid of the process the agent started (the namespaces' holder, or workerd itself without them). */
  readonly holderPid: number;
  /** Connections to its supervisor. */
  readonly pool: Pool;
  readonly exited: Promise<RuntimeExit>;
  readonly #targets: Map<string, TargetSpec>;
  /** Registered targets by what makes their isolate (runtime.ts). */
  readonly #byKey = new Map<string, string>();
  /** The functions whose versions it was told about. */
  readonly #functions = new Set<string>();
  readonly #child: ChildProcess;
  readonly #servers: Server[];
  readonly #group: Cgroup | null;
  readonly #cgroups: CgroupHost | null;
  readonly #limits: CgroupLimits;
  readonly #dir: string;
  #exit: RuntimeExit | null = null;
  /** The memory limit it runs under (its cgroup's, when it has one), in bytes. */
  #memoryLimitBytes: number;

  private constructor(options: RuntimeOptions, targets: Map<string, TargetSpec>, child: ChildProcess, servers: Server[], group: Cgroup | null, exited: Promise<RuntimeExit>) {
    this.id = options.id;
    this.#targets = targets;
    this.projectId = options.projectId;
    this.memoryMb = options.memoryMb;
    this.#child = child;
    this.pid = child.pid!;
    this.holderPid = child.pid!;
    this.#servers = servers;
    this.#group = group;
    this.#cgroups = options.cgroups;
    this.#limits = options.limits;
    this.#memoryLimitBytes = options.limits.memoryBytes ?? Infinity;
    this.#dir = options.dir;
    // A function may answer before it has read the request body, and workerd then resets the
    // connection we are still writing to: its answer must still be read (keepAnswersConnect).
    this.pool = new Pool('http://runtime', {
      connect: keepAnswersConnect(options.startTimeoutMs, join(options.dir, 'in', 'runtime.sock')),
      connections: 256,
      pipelining: 1,
      keepAliveTimeout: 60_000,
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    this.exited = exited.then((exit) => (this.#exit = exit));
  }

  /**
   * Makes a version of function `name` known to the runtime (its supervisor asks for it on first
   * use). Answers how many functions it now runs when `name` is new to it, else null.
   */
  register(target: string, name: string, spec: TargetSpec, key?: string): number | null {
    this.#targets.set(target, spec);
    if (key !== undefined) this.#byKey.set(key, target);
    if (this.#functions.has(name)) return null;
    this.#functions.add(name);
    return this.#functions.size;
  }

  /** Sets its cgroup's memory limit (the functions it runs grew in number); false without a cgroup or when refused. */
  limitMemory(bytes: number): boolean {
    this.#memoryLimitBytes = bytes;
    if (!this.#group || !this.#cgroups || !this.alive()) return false;
    try {
      this.#cgroups.create(this.#group.name, { ...this.#limits, memoryBytes: bytes });
      return true;
    } catch {
      return false;
    }
  }

  /** The memory limit it runs under, in bytes (Infinity for none). */
  get memoryLimitBytes(): number {
    return this.#memoryLimitBytes;
  }

  /** Its workerd's resident memory now, in bytes; null once it is gone. */
  residentBytes(): number | null {
    try {
      const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${this.pid}/status`, 'utf8'));
      return kb ? Number(kb[1]) * 1024 : null;
    } catch {
      return null;
    }
  }

  /** The target registered under `key` (what makes a version's isolate what it is), if any. */
  targetOf(key: string): string | undefined {
    return this.#byKey.get(key);
  }

  /** True until its exit was observed. */
  alive(): boolean {
    return this.#exit === null;
  }

  /** Whether its supervisor answers within `timeoutMs` (a function stuck in a loop blocks its thread). */
  async ping(timeoutMs: number): Promise<boolean> {
    if (!this.alive()) return false;
    try {
      const answer = await this.pool.request({ method: 'GET', path: '/.ping', signal: AbortSignal.timeout(timeoutMs) });
      await answer.body.dump();
      return answer.statusCode === 200;
    } catch {
      return false;
    }
  }

  /** Loads a version in its isolate: null when it loaded and has a default `fetch`, else the problem. */
  async check(target: string, timeoutMs: number): Promise<string | null> {
    const answer = await this.pool.request({ method: 'GET', path: `/.check/${target}`, signal: AbortSignal.timeout(timeoutMs) });
    const verdict = (await answer.body.json()) as { ok?: boolean; problem?: string };
    return verdict.ok === true ? null : (verdict.problem ?? 'the module failed to load');
  }

  /** Kills it (SIGKILL, its whole cgroup too) and waits for its exit. Idempotent. */
  async kill(): Promise<void> {
    if (this.#exit === null) {
      this.#child.kill('SIGKILL');
      this.#group?.kill();
    }
    await this.exited;
  }

  /** Starts a runtime and resolves once it listens; RuntimeStartError when it cannot be started. */
  static async start(options: RuntimeOptions): Promise<ProjectRuntime> {
    const dirs = { root: join(options.dir, 'root'), cfg: join(options.dir, 'cfg'), in: join(options.dir, 'in'), out: join(options.dir, 'out') };
    rmSync(options.dir, { recursive: true, force: true });
    for (const d of Object.values(dirs)) mkdirSync(d, { recursive: true, mode: 0o755 });
    chmodSync(dirs.root, 0o700);
    if (options.mode === 'os') {
      chownSync(dirs.in, options.uid, options.uid);
      chmodSync(dirs.in, 0o700);
    }
    const inside = insidePaths(options.mode, dirs);
    for (const path of [join(dirs.out, 'control.sock'), join(inside.in, 'runtime.sock'), join(dirs.in, 'runtime.sock')]) {
      if (Buffer.byteLength(path) > UNIX_PATH_MAX) {
        throw new RuntimeStartError(`the runtime's socket ${path} is longer than a unix socket's path may be (${UNIX_PATH_MAX} bytes): give SVCD_ROOT a shorter path`);
      }
    }
    copyFileSync(SUPERVISOR, join(dirs.cfg, 'supervisor.js'));
    writeFileSync(
      join(dirs.cfg, 'config.capnp'),
      runtimeConfig({ listen: join(inside.in, 'runtime.sock'), control: join(inside.out, 'control.sock'), egress: join(inside.out, 'egress.sock'), heapMb: options.memoryMb }),
    );
    const targets = new Map<string, TargetSpec>();
    const control = createServer({ keepAliveTimeout: 60_000 }, controlHandler(targets));
    const egress = options.egress.server(options.projectId);
    const servers = [control, egress];
    try {
      await Promise.all([listen(control, join(dirs.out, 'control.sock')), listen(egress, join(dirs.out, 'egress.sock'))]);
    } catch (err) {
      closeAll(servers);
      throw new RuntimeStartError(`the runtime's sockets cannot be opened under ${dirs.out} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
    let argv = launchArgv({
      mode: options.mode,
      workerd: options.workerd,
      tools: options.tools,
      dirs,
      uid: options.uid,
      args: ['serve', '--experimental', join(inside.cfg, 'config.capnp')],
    });
    let group: Cgroup | null = null;
    if (options.cgroups) {
      group = options.cgroups.create(options.cgroupName, options.limits);
      argv = options.cgroups.wrap(group, argv);
    }
    const { child, exited, lastError } = spawnWorkerd(argv, group, servers, options);
    if (child.pid === undefined) {
      const err = await new Promise<Error>((resolve) => child.once('error', resolve));
      await exited;
      throw new RuntimeStartError(`workerd cannot be started (${(err as NodeJS.ErrnoException).code ?? err.message})`);
    }
    const runtime = new ProjectRuntime(options, targets, child, servers, group, exited);
    const ready = await waitForSocket(runtime, options.startTimeoutMs);
    if (ready !== null) {
      await runtime.kill();
      throw new RuntimeStartError(`the function runtime did not start: ${ready}${lastError() ? ` (${lastError()})` : ''}`);
    }
    if (options.mode === 'os') runtime.pid = workerdPid(runtime.holderPid) ?? runtime.holderPid;
    return runtime;
  }
}

/** The control socket: `GET /targets/<id>` answers a registered version's module, environment and origin. */
function controlHandler(targets: ReadonlyMap<string, TargetSpec>) {
  return (req: IncomingMessage, res: ServerResponse) => {
    const match = /^\/targets\/([a-z0-9]{1,64})$/.exec(req.url ?? '');
    const spec = match ? targets.get(match[1]!) : undefined;
    if (req.method !== 'GET' || !spec) {
      res.writeHead(404, { 'content-length': 0 });
      res.end();
      return;
    }
    readFile(spec.modulePath, 'utf8').then(
      (code) => {
        const body = JSON.stringify({ code, env: spec.env, origin: spec.origin, compatibilityDate: FUNCTION_COMPATIBILITY_DATE, compatibilityFlags: FUNCTION_COMPATIBILITY_FLAGS });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      },
      () => {
        res.writeHead(404, { 'content-length': 0 });
        res.end();
      },
    );
  };
}

/** Listens on a unix socket that the runtime's user may connect to. */
function listen(server: Server, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      chmodSync(path, 0o666);
      resolve();
    });
  });
}

/** Resolves null once the runtime answers on its socket, else why not (it exited, or the time ran out). */
async function waitForSocket(runtime: ProjectRuntime, timeoutMs: number): Promise<string | null> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void runtime.exited.then(() => (exited = true));
  for (let wait = 1; ; wait = Math.min(wait * 2, 20)) {
    if (exited) return 'it exited while starting';
    if (await runtime.ping(Math.max(50, Math.min(1000, deadline - Date.now())))) return null;
    if (Date.now() >= deadline) return `it did not answer within ${timeoutMs} ms`;
    await new Promise((r) => setTimeout(r, wait));
  }
}
