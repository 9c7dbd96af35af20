/**
 * The functions of a host agent (docs/functions.md): deploys, deletes, invocations and logs of the
 * functions of the projects placed on this agent. The agent is the one writer of its projects'
 * function items, so what it remembers of them (each function's current version, ./heads.ts) is
 * what DynamoDB holds.
 *
 * Functions run in workerd isolates, one runtime process per project and memory setting inside the
 * OS sandbox (./runtimes.ts, ./project-runtime.ts, ./sandbox.ts; docs/functions.md "Isolation").
 * Deploys and deletes of one function run one at a time (in arrival order, ./deploys.ts);
 * invocations (./invocation.ts) never wait for them: an invocation runs the version current when
 * it began.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Settings } from '../../shared/config.ts';
import type { Db } from '../../shared/db/client.ts';
import { orphanVersions, type FunctionRecord } from '../../shared/db/functions.ts';
import { ServiceError } from '../../shared/errors.ts';
import { ID_PATTERNS } from '../../shared/ids.ts';
import type { KeyRing } from '../../shared/secrets-crypto.ts';
import { nowIso } from '../../shared/time.ts';
import type { FunctionOutcome } from '../metrics.ts';
import { FunctionDeploys, type DeployInput, type RemoveInput } from './deploys.ts';
import { egressPolicy, EgressFilter } from './egress.ts';
import { invocationEnv, SecretSets, type SecretSet } from './env.ts';
import { FunctionHeads } from './heads.ts';
import { busy, describeExit, outcomeOf, runInvocation, type InvocationDeps, type InvocationInput } from './invocation.ts';
import { Launcher, type RuntimeLaunch } from './launch.ts';
import { RECYCLE_CHECK_MS, recycleBytes, RUNTIME_PIDS_MAX, runtimeMemoryMb } from './limits.ts';
import { FunctionLogStore, LineSplitter, Redactor } from './logs.ts';
import { ModuleFiles, type ModuleBlobStore } from './modules.ts';
import { ProjectRuntime, RuntimeStartError } from './project-runtime.ts';
import { HostFullError, Runtimes } from './runtimes.ts';
import { uidOf } from './sandbox.ts';

export type { DeployInput } from './deploys.ts';
export type { InvocationInput } from './invocation.ts';

/** What the runtime needs from the agent. */
export interface FunctionRuntimeDeps {
  settings: Settings;
  db: Db;
  agentId: string;
  /** Absolute `SVCD_ROOT`. */
  root: string;
  secrets: KeyRing | null;
  /** The blob store of module bytes (host-agent/functions/modules.ts), built on first use. */
  blobs: () => ModuleBlobStore;
  log: (line: string) => void;
  now: () => number;
  /** One invocation ended (docs/observability.md "Metrics"). */
  onInvocation?: (outcome: FunctionOutcome, seconds: number) => void;
}

/** Whose a target is: its function's log and the secrets redacted from it. */
interface TargetMeta {
  projectId: string;
  name: string;
  version: number;
  redactor: Redactor;
}

/** The agent's functions. */
export class FunctionRuntime {
  readonly #deps: FunctionRuntimeDeps;
  readonly #area: string;
  readonly #launcher: Launcher;
  readonly #modules: ModuleFiles;
  readonly #secretSets: SecretSets;
  readonly #runtimes: Runtimes;
  readonly #egress: EgressFilter;
  readonly logs: FunctionLogStore;
  readonly #heads: FunctionHeads;
  readonly #deploys: FunctionDeploys;
  /** Invocations in flight, per function (`<project>/<name>`) and per project. */
  readonly #running = new Map<string, number>();
  readonly #runningByProject = new Map<string, number>();
  /** Every target a runtime of this agent was told about. */
  readonly #targets = new Map<string, TargetMeta>();
  #started = 0;
  readonly #invocationDeps: InvocationDeps;

  constructor(deps: FunctionRuntimeDeps) {
    this.#deps = deps;
    const { settings, now, log } = deps;
    this.#area = join(deps.root, 'functions');
    this.#launcher = new Launcher({ mode: settings.SVCD_FUNCTION_SANDBOX, workerd: settings.SVCD_FUNCTION_WORKERD, dir: join(this.#area, '.runtimes'), now, log });
    this.#egress = new EgressFilter(egressPolicy(settings.SVCD_FUNCTION_EGRESS, settings.SVCD_FUNCTION_EGRESS_UNSAFE_ALLOW), log);
    if (this.#egress.policy.unsafeAllow.size > 0) {
      log(`agent: WARNING: SVCD_FUNCTION_EGRESS_UNSAFE_ALLOW lets functions reach ${[...this.#egress.policy.unsafeAllow].join(', ')} whatever their address. Development and tests only (docs/functions.md "Egress").`);
    }
    this.#modules = new ModuleFiles(this.#area, deps.blobs);
    this.#secretSets = new SecretSets(deps, now);
    this.#runtimes = new Runtimes({
      max: settings.SVCD_FUNCTION_MAX_RUNTIMES,
      idleMs: settings.SVCD_FUNCTION_IDLE_MS,
      now,
      start: (projectId, memoryMb) => this.#startRuntime(projectId, memoryMb, 'r'),
      recycle: { everyMs: RECYCLE_CHECK_MS, when: (runtime) => this.#recycles(runtime) },
    });
    this.logs = new FunctionLogStore(this.#area, settings.SVCD_FUNCTION_LOG_MAX_BYTES, now);
    this.#invocationDeps = { logs: this.logs, kill: (runtime) => this.#runtimes.kill(runtime) };
    this.#heads = new FunctionHeads(deps.db, now);
    this.#deploys = new FunctionDeploys({
      ...deps,
      heads: this.#heads,
      modules: this.#modules,
      secretSets: this.#secretSets,
      logs: this.logs,
      launch: () => this.#launch(),
      startCheckRuntime: (projectId, memoryMb) => this.#starting(() => this.#startRuntime(projectId, memoryMb, 'c')),
    });
  }

  /**
   * Probes the runtime in the background and removes what a crash left: runtime directories and
   * temporary module files (now), version items of deleted functions with their blobs (in the
   * background). Never rejects.
   */
  start(): Promise<void> {
    rmSync(join(this.#area, '.runtimes'), { recursive: true, force: true });
    void this.#launcher.launch();
    const projects = this.#projectDirs();
    for (const projectId of projects) {
      const dir = join(this.#area, projectId, 'modules');
      let names: string[] = [];
      try {
        names = readdirSync(dir);
      } catch {
        // No modules here.
      }
      for (const name of names) if (name.endsWith('.tmp.mjs')) rmSync(join(dir, name), { force: true });
    }
    const before = nowIso(this.#deps.now());
    return (async () => {
      for (const projectId of projects) {
        try {
          const orphans = await orphanVersions(this.#deps.db, projectId, before);
          if (orphans.length > 0) await this.#deploys.removeVersions(projectId, orphans, 'start-up sweep');
        } catch (err) {
          this.#deps.log(`agent: functions: sweeping ${projectId} failed: ${(err as Error).message}; retried at the next start`);
        }
      }
    })();
  }

  /** Invocations of the project in flight now (a project is not deleted while it has any). */
  inFlight(projectId: string): number {
    return this.#runningByProject.get(projectId) ?? 0;
  }

  /** The live runtimes and the counters (tests, the benchmark). */
  runtimeState(): { runtimes: { projectId: string; memoryMb: number; pid: number; active: number }[]; started: number; reused: number; exited: number; egress: { passed: number; refused: number } } {
    return {
      runtimes: this.#runtimes.list(),
      ...this.#runtimes.stats,
      egress: { ...this.#egress.stats },
    };
  }

  /** A secret of the project was put or deleted: the next invocation runs with the new set. */
  secretsChanged(projectId: string): void {
    this.#secretSets.invalidate(projectId);
  }

  /**
   * The project was deleted: its runtimes end, nothing of it is served again. With `deleted` false it
   * moved (docs/durability.md): its runtimes end and what is remembered of it is read again when needed.
   */
  forgetProject(projectId: string, deleted = true): void {
    this.#heads.forgetProject(projectId, deleted);
    this.#secretSets.invalidate(projectId);
    for (const [target, meta] of [...this.#targets]) if (meta.projectId === projectId) this.#targets.delete(target);
    this.#runtimes.retireProject(projectId);
  }

  /** Refuses new deploys and deletes, lets those under way finish, then ends every runtime. */
  async stop(): Promise<void> {
    await this.#deploys.stop();
    await this.#runtimes.close();
    await this.#egress.close();
  }

  /** The function's current head, or 404. */
  current(projectId: string, name: string): Promise<FunctionRecord> {
    return this.#heads.current(projectId, name);
  }

  /** The last `tail` lines of the function's log; 404 when there is no such function. */
  async logTail(projectId: string, name: string, tail: number): Promise<string[]> {
    await this.current(projectId, name);
    return this.logs.tail(projectId, name, tail);
  }

  /** Deploys a new version (./deploys.ts); answers the new head and whether the function was created. */
  deploy(input: DeployInput): Promise<{ head: FunctionRecord; created: boolean }> {
    return this.#deploys.deploy(input);
  }

  /** Deletes a function (./deploys.ts); answers the head as it was. */
  remove(input: RemoveInput): Promise<FunctionRecord> {
    return this.#deploys.remove(input);
  }

  /**
   * Runs one invocation: the client's request is streamed to the function's isolate in its
   * project's runtime and the answer streamed into `res`. Throws a ServiceError when nothing has been
   * answered yet (the caller renders it); once the answer has begun, a failure cuts it short. Every
   * invocation is counted by outcome (docs/observability.md "Metrics").
   */
  async invoke(req: IncomingMessage, res: ServerResponse, input: InvocationInput): Promise<void> {
    const began = performance.now();
    let outcome: FunctionOutcome = 'error';
    try {
      outcome = await this.#invoke(req, res, input);
    } catch (err) {
      outcome = outcomeOf(err);
      throw err;
    } finally {
      this.#deps.onInvocation?.(outcome, (performance.now() - began) / 1000);
    }
  }

  async #invoke(req: IncomingMessage, res: ServerResponse, input: InvocationInput): Promise<FunctionOutcome> {
    const { projectId, name } = input;
    const fn = `${projectId}/${name}`;
    const head = await this.current(projectId, name);
    if ((this.#running.get(fn) ?? 0) >= head.max_concurrency) {
      throw busy(`function ${name} is already running ${head.max_concurrency} invocations (its max_concurrency)`);
    }
    const share = this.#deps.settings.SVCD_FUNCTION_PROJECT_CONCURRENCY;
    if ((this.#runningByProject.get(projectId) ?? 0) >= share) {
      throw busy(`project ${projectId} is already running ${share} invocations (its share of this host, SVCD_FUNCTION_PROJECT_CONCURRENCY)`);
    }
    this.#count(fn, projectId, +1);
    try {
      await this.#launch();
      const set = await this.#secretSets.get(projectId);
      const held = await this.#starting(() => this.#runtimes.acquire(projectId, head.memory_mb));
      try {
        const target = await this.#register(held.runtime, head, set, input.origin);
        return await runInvocation(this.#invocationDeps, held.runtime, target, head, req, res, input);
      } finally {
        held.release();
      }
    } finally {
      this.#count(fn, projectId, -1);
    }
  }

  /** A runtime from `start`: 429 when the host is full, 503 when it cannot start. */
  async #starting<T>(start: () => Promise<T>): Promise<T> {
    try {
      return await start();
    } catch (err) {
      if (err instanceof HostFullError) throw busy(err.message);
      if (err instanceof RuntimeStartError) {
        this.#launcher.invalidate();
        throw new ServiceError('function_runtime_missing', `functions cannot run on host agent ${this.#deps.agentId}: ${err.message}`);
      }
      throw err;
    }
  }

  /**
   * Tells `runtime` about the function's current version with the project's environment: its target
   * id, derived from all that makes its isolate what it is (version, generation, the secret set's
   * fingerprint, the origin), so an isolate only ever serves invocations that would load it as it is.
   */
  async #register(runtime: ProjectRuntime, head: FunctionRecord, set: SecretSet, origin: string): Promise<string> {
    const { project: projectId, name } = head;
    // A warm invocation finds its target told already: no hash, file check or environment to make.
    const key = `${name}\0${head.generation}\0${head.version}\0${set.fingerprint}\0${origin}`;
    const known = runtime.targetOf(key);
    if (known !== undefined) return known;
    const target = `v${createHash('sha256').update(`${projectId}\0${name}\0${head.generation}\0${head.version}\0${set.fingerprint}\0${origin}`).digest('hex').slice(0, 32)}`;
    if (!this.#targets.has(target)) {
      this.#targets.set(target, { projectId, name, version: head.version, redactor: new Redactor(set.secrets) });
    }
    const modulePath = await this.#modules.ensure(projectId, head);
    const functions = runtime.register(target, name, { modulePath, env: invocationEnv(set, { projectId, functionName: name, cloudOrigin: origin }), origin }, key);
    if (functions !== null) runtime.limitMemory(runtimeMemoryMb(head.memory_mb, functions, this.#deps.settings.SVCD_FUNCTION_PROJECT_MEMORY_MB) * 1024 * 1024);
    return target;
  }

  /** Starts a runtime of the project (`kind` r: serving, c: a deploy's check). */
  async #startRuntime(projectId: string, memoryMb: number, kind: 'r' | 'c'): Promise<ProjectRuntime> {
    const launch = await this.#launch();
    const { settings } = this.#deps;
    // Short: its sockets' paths live below it, and a unix socket's path has at most 107 bytes.
    const n = ++this.#started;
    const id = `${projectId}-${kind}${memoryMb}-${n}`;
    const runtime = await ProjectRuntime.start({
      id,
      projectId,
      memoryMb,
      mode: launch.mode,
      workerd: launch.workerd,
      tools: launch.tools,
      uid: uidOf(projectId),
      dir: join(this.#area, '.runtimes', String(n)),
      cgroups: launch.cgroups,
      cgroupName: `svc-${this.#deps.agentId}/fn-${id}`,
      limits: {
        memoryBytes: runtimeMemoryMb(memoryMb, 1, settings.SVCD_FUNCTION_PROJECT_MEMORY_MB) * 1024 * 1024,
        cpuShares: 1024,
        cpuQuotaPercent: settings.SVCD_FUNCTION_CPU_PERCENT,
        pidsMax: RUNTIME_PIDS_MAX,
      },
      egress: this.#egress,
      startTimeoutMs: settings.SVCD_FUNCTION_START_TIMEOUT_MS,
      onLine: (target, stream, text) => this.#line(id, target, stream, text),
    });
    void runtime.exited.then((exit) => {
      if (exit.signal !== 'SIGKILL' || exit.heapLimit || exit.oomKilled) this.#deps.log(`agent: functions: runtime ${id} (pid ${runtime.pid}) exited: ${describeExit(exit, memoryMb)}`);
    });
    return runtime;
  }

  /** Whether `runtime` is recycled now: its resident memory is past its bound (`SVCD_FUNCTION_RECYCLE_MB`, else ./limits.ts `recycleBytes`). */
  #recycles(runtime: ProjectRuntime): boolean {
    const resident = runtime.residentBytes();
    const setting = this.#deps.settings.SVCD_FUNCTION_RECYCLE_MB;
    const bound = setting === undefined ? recycleBytes(runtime.memoryLimitBytes, runtime.memoryMb) : setting * 1024 * 1024;
    if (resident === null || resident <= bound) return false;
    const mib = (bytes: number) => Math.round(bytes / 1048576);
    this.#deps.log(`agent: functions: runtime ${runtime.id} (pid ${runtime.pid}) recycled: ${mib(resident)} MiB resident, past its bound of ${mib(bound)} MiB; a fresh one takes the next invocations`);
    return true;
  }

  /** A line of a runtime: a function's console into its log (secrets redacted), else the agent's log. */
  #line(runtimeId: string, target: string | null, stream: 'stdout' | 'stderr' | 'agent', text: string): void {
    const meta = target === null ? undefined : this.#targets.get(target);
    if (!meta) {
      if (text.trim()) this.#deps.log(`agent: functions: runtime ${runtimeId}: ${text.slice(0, 500)}`);
      return;
    }
    const lines: string[] = [];
    const splitter = new LineSplitter(meta.redactor, (line) => lines.push(line));
    splitter.push(text);
    splitter.end();
    this.logs.append(meta.projectId, meta.name, meta.version, stream, lines);
  }

  async #launch(): Promise<RuntimeLaunch> {
    const launch = await this.#launcher.launch();
    if (typeof launch === 'string') throw new ServiceError('function_runtime_missing', `functions cannot run on host agent ${this.#deps.agentId}: ${launch}`);
    return launch;
  }

  #count(fn: string, projectId: string, delta: number): void {
    const n = (this.#running.get(fn) ?? 0) + delta;
    if (n > 0) this.#running.set(fn, n);
    else this.#running.delete(fn);
    const p = (this.#runningByProject.get(projectId) ?? 0) + delta;
    if (p > 0) this.#runningByProject.set(projectId, p);
    else this.#runningByProject.delete(projectId);
  }

  /** Project ids with a directory in the functions area. */
  #projectDirs(): string[] {
    try {
      return readdirSync(this.#area).filter((n) => ID_PATTERNS.prj.test(n));
    } catch {
      return [];
    }
  }
}
