/**
 * The functions of a host agent (docs/functions.md): deploys, deletes, invocations and logs of the
 * functions of the projects placed on this agent. The agent is the one writer of its projects'
 * function items, so what it remembers of them (each function's current version) is what DynamoDB
 * holds; it is read once per function and re-read after REFRESH_MS in any case.
 *
 * Functions run in workerd isolates, one runtime process per project and memory setting inside the
 * OS sandbox (./runtimes.ts, ./project-runtime.ts, ./sandbox.ts; docs/functions.md "Isolation").
 * Deploys and deletes of one function run one at a time (in arrival order); invocations never wait
 * for them: an invocation runs the version current when it began.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Settings } from '../../shared/config.ts';
import type { Db } from '../../shared/db/client.ts';
import {
  allVersions,
  deleteHead,
  deleteVersions,
  getFunction,
  moduleReferences,
  orphanVersions,
  putVersion,
  type FunctionRecord,
  type FunctionVersionRecord,
} from '../../shared/db/functions.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import { forward, UpstreamError } from '../../shared/http/forward.ts';
import { ID_PATTERNS, randomHex } from '../../shared/ids.ts';
import { FUNCTION_HEADERS, type FunctionSettings } from '../../shared/schemas/functions.ts';
import type { KeyRing } from '../../shared/secrets-crypto.ts';
import { nowIso } from '../../shared/time.ts';
import type { FunctionOutcome } from '../metrics.ts';
import { egressPolicy, EgressFilter } from './egress.ts';
import { invocationEnv, SecretSets, type SecretSet } from './env.ts';
import { Launcher, type RuntimeLaunch } from './launch.ts';
import { FunctionLogStore, LineSplitter, Redactor } from './logs.ts';
import { ModuleFiles, newModuleBlobName, type ModuleBlobStore } from './modules.ts';
import { ProjectRuntime, RuntimeStartError, type RuntimeExit } from './project-runtime.ts';
import { HostFullError, Runtimes } from './runtimes.ts';
import { uidOf } from './sandbox.ts';
import { ProjectQueue } from '../tenants/queue.ts';

/** Age after which a function's remembered head is read again. */
const REFRESH_MS = 60_000;
/** Seconds a client told `function_busy` is asked to wait (`Retry-After`). */
export const BUSY_RETRY_AFTER_SECONDS = 1;
/** How long a runtime has to answer its ping after an invocation ran past its timeout, before it is killed. */
const STUCK_PING_MS = 250;
/** Tasks (threads) one runtime may have: workerd's own and a margin. */
const RUNTIME_PIDS_MAX = 64;
/**
 * Memory a runtime needs besides its functions: workerd's own buffers grow with the request rate
 * (the functions benchmark prints the peak, about 350 MiB at 5,500 invocations a second here; with
 * 96 MiB a runtime answering "ok" was killed under that load).
 */
const RUNTIME_OVERHEAD_MB = 384;
/** Memory counted for each further function's isolate in a runtime (an idle isolate holds a few MiB). */
const ISOLATE_ALLOWANCE_MB = 8;

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

/** A deploy as the internal route hands it over. */
export interface DeployInput {
  projectId: string;
  name: string;
  settings: FunctionSettings;
  body: ReadableStream<Uint8Array>;
  length: number | null;
  maxBytes: number;
  /** `CLOUD_ORIGIN` for the module's check. */
  origin: string;
  actor: string;
  requestId: string;
}

/** An invocation as the internal route hands it over: the client's request, streamed on to the runtime. */
export interface InvocationInput {
  projectId: string;
  name: string;
  /** The client's method exactly, also for a GET or HEAD that carried a body. */
  method: string;
  /** What follows `/invoke` in the path (raw, starting with `/`), and the query with its `?`. */
  path: string;
  /** Exactly the headers the function sees, flat name/value pairs (host-agent/routes/functions.ts). */
  headers: string[];
  /** Whether the client sent a body, whatever the method. */
  hasBody: boolean;
  /** The client's declared `Content-Length`, or null. */
  length: number | null;
  origin: string;
  requestId: string;
  /**
   * Set when the answer goes to the client itself (./public.ts), not back over the handlers' hop:
   * the function's `Content-Encoding` and a HEAD's `Content-Length` keep their own names, and these
   * headers (the service's request id, CORS) are added, replacing the function's own of those names.
   */
  direct?: { headers: string[] };
}

interface Remembered {
  head: FunctionRecord;
  readAt: number;
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
  readonly #heads = new Map<string, Remembered>();
  /** Deploys and deletes of one function, one at a time (keyed `<project>/<name>`). */
  readonly #serial = new ProjectQueue();
  /** Deploy checks, one at a time per project: a project deploying many functions at once starts one throwaway runtime at a time. */
  readonly #checks = new ProjectQueue();
  /** Invocations in flight, per function (`<project>/<name>`) and per project. */
  readonly #running = new Map<string, number>();
  readonly #runningByProject = new Map<string, number>();
  /** Projects deleted while this agent runs: nothing of theirs is served any more. */
  readonly #gone = new Set<string>();
  /** Every target a runtime of this agent was told about. */
  readonly #targets = new Map<string, TargetMeta>();
  #started = 0;

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
    });
    this.logs = new FunctionLogStore(this.#area, settings.SVCD_FUNCTION_LOG_MAX_BYTES, now);
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
          if (orphans.length > 0) await this.#removeVersions(projectId, orphans, 'start-up sweep');
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

  /** The project was deleted: its runtimes end, nothing of it is served again. */
  forgetProject(projectId: string): void {
    this.#gone.add(projectId);
    this.#secretSets.invalidate(projectId);
    for (const fn of [...this.#heads.keys()]) if (fn.startsWith(`${projectId}/`)) this.#heads.delete(fn);
    for (const [target, meta] of [...this.#targets]) if (meta.projectId === projectId) this.#targets.delete(target);
    this.#runtimes.retireProject(projectId);
  }

  /** Refuses new deploys and deletes, lets those under way finish, then ends every runtime. */
  async stop(): Promise<void> {
    await this.#serial.close();
    await this.#checks.close();
    await this.#runtimes.close();
    await this.#egress.close();
  }

  /** The function's current head, or 404. */
  async current(projectId: string, name: string): Promise<FunctionRecord> {
    const fn = `${projectId}/${name}`;
    const remembered = this.#heads.get(fn);
    if (!this.#gone.has(projectId) && remembered && this.#deps.now() - remembered.readAt <= REFRESH_MS) return remembered.head;
    const head = this.#gone.has(projectId) ? null : await getFunction(this.#deps.db, projectId, name);
    if (!head) {
      this.#heads.delete(fn);
      throw errors.notFound(`function ${name} not found`);
    }
    // A deploy that finished while this read was in flight wrote a newer head: keep the newer.
    const latest = this.#heads.get(fn);
    if (!latest || latest.head.generation !== head.generation || latest.head.version <= head.version) {
      this.#heads.set(fn, { head, readAt: this.#deps.now() });
    }
    return this.#heads.get(fn)!.head;
  }

  /** The last `tail` lines of the function's log; 404 when there is no such function. */
  async logTail(projectId: string, name: string, tail: number): Promise<string[]> {
    await this.current(projectId, name);
    return this.logs.tail(projectId, name, tail);
  }

  /**
   * Deploys a new version: the module is received, loaded in a runtime of its own (with the
   * project's environment, inside the sandbox), stored in the blob store, then recorded. Answers the
   * new head and whether the function was created.
   */
  deploy(input: DeployInput): Promise<{ head: FunctionRecord; created: boolean }> {
    const { projectId, name } = input;
    return this.#serial.run(`${projectId}/${name}`, async () => {
      if (this.#gone.has(projectId)) throw errors.notFound(`project ${projectId} not found`);
      await this.#launch();
      const received = await this.#modules.receive(projectId, input.body, input.maxBytes, input.length);
      try {
        const set = await this.#secretSets.get(projectId);
        await this.#checks.run(projectId, () => this.#check(projectId, name, received.path, input.settings.memory_mb, input.origin, set));
        const kept = { ...received, path: await this.#modules.keep(projectId, received) };
        const blob = await this.#modules.store(projectId, await newModuleBlobName(projectId, name), kept);
        let result: { head: FunctionRecord; created: boolean };
        try {
          result = await putVersion(
            this.#deps.db,
            { project: projectId, name, sha256: received.sha256, size: received.size, ...input.settings, ...blob },
            { actor: input.actor, requestId: input.requestId, at: nowIso(this.#deps.now()) },
            () => randomHex(8),
          );
        } catch (err) {
          await this.#modules.discard(projectId, blob).catch((e: unknown) => this.#logBlobLeft(projectId, blob.blob, e));
          throw err;
        }
        this.#heads.set(`${projectId}/${name}`, { head: result.head, readAt: this.#deps.now() });
        this.logs.append(projectId, name, result.head.version, 'agent', [`deployed version ${result.head.version} (${received.size} bytes, sha256 ${received.sha256})`]);
        return result;
      } finally {
        await this.#modules.drop(received);
      }
    });
  }

  /**
   * Deletes a function: from the answer on it is 404 to every route; invocations in flight finish.
   * Its versions, their blobs and its logs are removed after the head. Answers the head as it was.
   */
  remove(input: { projectId: string; name: string; actor: string; requestId: string }): Promise<FunctionRecord> {
    const { projectId, name } = input;
    const fn = `${projectId}/${name}`;
    return this.#serial.run(fn, async () => {
      let head: FunctionRecord | null = null;
      for (let attempt = 0; ; attempt++) {
        head = this.#gone.has(projectId) ? null : await getFunction(this.#deps.db, projectId, name);
        if (!head) throw errors.notFound(`function ${name} not found`);
        if (await deleteHead(this.#deps.db, head, { actor: input.actor, requestId: input.requestId, at: nowIso(this.#deps.now()) })) break;
        if (attempt === 20) throw errors.conflict(`function ${name} is being changed concurrently, retry`);
      }
      this.#heads.delete(fn);
      try {
        await this.#removeVersions(projectId, await allVersions(this.#deps.db, projectId, name, head.generation), `delete of ${name}`);
      } catch (err) {
        this.#deps.log(`agent: functions: removing the versions of ${projectId}/${name} failed: ${(err as Error).message}; removed at the next start`);
      }
      this.logs.remove(projectId, name);
      return head;
    });
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
      const held = await this.#hold(projectId, head.memory_mb);
      try {
        const target = await this.#register(held.runtime, head, set, input.origin);
        return await this.#run(held.runtime, target, head, req, res, input);
      } finally {
        held.release();
      }
    } finally {
      this.#count(fn, projectId, -1);
    }
  }

  /** The project's runtime for `memoryMb`: 429 when the host is full, 503 when it cannot start. */
  async #hold(projectId: string, memoryMb: number) {
    try {
      return await this.#runtimes.acquire(projectId, memoryMb);
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

  async #run(runtime: ProjectRuntime, target: string, head: FunctionRecord, req: IncomingMessage, res: ServerResponse, input: InvocationInput): Promise<FunctionOutcome> {
    let timedOut = false;
    let failed: string | null = null;
    const cut = new AbortController();
    // Past the deadline the invocation is cut; a runtime whose thread does not answer a ping is stuck
    // in the function's code and is killed before the 504 is answered, so the client's next
    // invocation finds a fresh one (docs/functions.md "Timeouts").
    let settled: Promise<void> = Promise.resolve();
    const timer = setTimeout(() => {
      timedOut = true;
      cut.abort();
      settled = runtime.ping(STUCK_PING_MS).then(async (answers) => {
        this.logs.append(head.project, head.name, head.version, 'agent', [
          `invocation ${input.requestId} ran past its timeout of ${head.timeout_ms} ms${answers ? '' : `: its runtime (pid ${runtime.pid}) was stuck and is killed`}`,
        ]);
        if (!answers) await this.#runtimes.kill(runtime);
      });
    }, head.timeout_ms);
    const isHead = input.method === 'HEAD';
    try {
      // The client's headers, and two marks the function's isolate reads and removes (./supervisor.js):
      // whether the client sent a body, and the Content-Length it declared (RFC 9110 §8.6), which
      // also frames this hop. Their names are of the service's own (x-svc-fn-), which no client
      // header ever carries this far (host-agent/routes/functions.ts).
      const headers = [...input.headers, 'x-svc-fn-rt-body', input.hasBody ? '1' : '0'];
      if (input.length !== null) headers.push('content-length', String(input.length), 'x-svc-fn-rt-length', String(input.length));
      await forward(runtime.pool, req, res, {
        method: input.method,
        path: `/${target}${input.path}`,
        headers,
        body: input.hasBody ? req : null,
        signal: cut.signal,
        answerHeaders: (_status, flat) => {
          const out: string[] = [];
          const direct = input.direct;
          const replaced = direct ? new Set(direct.headers.filter((_, i) => i % 2 === 0)) : null;
          for (let i = 0; i < flat.length; i += 2) {
            const name = flat[i]!.toLowerCase();
            if (name === 'x-svc-rt-failed') {
              failed = flat[i + 1]!;
              continue;
            }
            if (direct) {
              if (replaced!.has(name)) continue;
              out.push(name === FUNCTION_HEADERS.contentEncoding ? 'content-encoding' : flat[i]!, flat[i + 1]!);
              continue;
            }
            // A HEAD crossed the handlers' hop as a GET: its length travels renamed, with an empty body.
            if (isHead && name === 'content-length') {
              out.push(FUNCTION_HEADERS.contentLength, flat[i + 1]!);
              continue;
            }
            out.push(flat[i]!, flat[i + 1]!);
          }
          if (direct) out.push(...direct.headers);
          else if (isHead) out.push('content-length', '0');
          return out;
        },
      });
      if (timedOut) {
        await settled;
        return 'timeout';
      }
      return failed === null ? 'ok' : 'bad_output';
    } catch (err) {
      if (!(err instanceof UpstreamError)) throw err;
      if (timedOut) await settled;
      if (timedOut) throw new ServiceError('function_timeout', `function ${head.name} did not answer within its timeout of ${head.timeout_ms} ms`);
      const exit = await Promise.race([runtime.exited, new Promise<null>((r) => setTimeout(() => r(null), 200))]);
      if (exit === null) throw new ServiceError('function_bad_output', `the runtime of function ${head.name} failed before answering`);
      this.logs.append(head.project, head.name, head.version, 'agent', [`its runtime (pid ${runtime.pid}) ended during invocation ${input.requestId}: ${describeExit(exit, head.memory_mb)}`]);
      throw new ServiceError('function_bad_output', `function ${head.name} ended before answering: ${describeExit(exit, head.memory_mb)}`);
    } finally {
      clearTimeout(timer);
    }
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

  /** Loads the module in a runtime of its own and ends it; 400 naming the problem when it fails. */
  async #check(projectId: string, name: string, modulePath: string, memoryMb: number, origin: string, set: SecretSet): Promise<void> {
    let runtime: ProjectRuntime;
    try {
      runtime = await this.#startRuntime(projectId, memoryMb, 'c');
    } catch (err) {
      if (err instanceof RuntimeStartError) {
        this.#launcher.invalidate();
        throw new ServiceError('function_runtime_missing', `functions cannot run on host agent ${this.#deps.agentId}: ${err.message}`);
      }
      throw err;
    }
    try {
      const target = 'check';
      runtime.register(target, name, { modulePath, env: invocationEnv(set, { projectId, functionName: name, cloudOrigin: origin }), origin });
      let problem: string | null;
      try {
        problem = await runtime.check(target, this.#deps.settings.SVCD_FUNCTION_START_TIMEOUT_MS);
      } catch {
        const exit = await Promise.race([runtime.exited, new Promise<null>((r) => setTimeout(() => r(null), 200))]);
        problem = exit ? `the module's runtime ended while loading it (${describeExit(exit, memoryMb)})` : `the module did not finish loading within ${this.#deps.settings.SVCD_FUNCTION_START_TIMEOUT_MS} ms`;
      }
      if (problem !== null) throw errors.invalid(`body: ${new Redactor(set.secrets).redact(problem)}`);
    } finally {
      await runtime.kill();
    }
  }

  async #launch(): Promise<RuntimeLaunch> {
    const launch = await this.#launcher.launch();
    if (typeof launch === 'string') throw new ServiceError('function_runtime_missing', `functions cannot run on host agent ${this.#deps.agentId}: ${launch}`);
    return launch;
  }

  /**
   * Removes version items with their blobs, then the local copies no remaining version refers to. A
   * running isolate keeps the module it has loaded; a copy needed again is fetched again.
   */
  async #removeVersions(projectId: string, versions: FunctionVersionRecord[], why: string): Promise<void> {
    for (const v of versions) await this.#modules.discard(projectId, v).catch((err: unknown) => this.#logBlobLeft(projectId, v.blob, err));
    await deleteVersions(this.#deps.db, versions);
    if (versions.length > 0) this.#deps.log(`agent: functions: ${why}: ${versions.length} versions of ${projectId} removed`);
    await this.#modules.prune(projectId, (await moduleReferences(this.#deps.db, projectId)).sha256s);
  }

  #logBlobLeft(projectId: string, blob: string, err: unknown): void {
    this.#deps.log(`agent: functions: module blob ${projectId}/${blob} could not be removed (${(err as Error).message}); it is left unreferenced`);
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

/**
 * The memory limit of a runtime running `functions` functions of `memoryMb` each: one function's
 * `memory_mb` (its heap, and its array buffers, which live outside the heap and which only this limit
 * bounds), ISOLATE_ALLOWANCE_MB for each other function's isolate at rest, and what workerd needs
 * itself; at most the project's share of the host (`SVCD_FUNCTION_PROJECT_MEMORY_MB`), never less
 * than one function's. So no function of it can hold much past its own `memory_mb`, however many
 * siblings it has, while idle siblings never push the runtime over.
 */
export function runtimeMemoryMb(memoryMb: number, functions: number, projectMb: number): number {
  return RUNTIME_OVERHEAD_MB + Math.max(memoryMb, Math.min(memoryMb + ISOLATE_ALLOWANCE_MB * (functions - 1), projectMb));
}

/** How a runtime ended, in words: past its memory, killed, or its exit status. */
function describeExit(exit: RuntimeExit, memoryMb: number): string {
  if (exit.heapLimit || exit.oomKilled) return `it passed its memory limit of ${memoryMb} MiB (memory_mb)`;
  return exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code}`;
}

/** The metrics outcome of an invocation that threw. */
function outcomeOf(err: unknown): FunctionOutcome {
  if (!(err instanceof ServiceError)) return 'error';
  switch (err.code) {
    case 'function_busy':
      return 'busy';
    case 'function_timeout':
      return 'timeout';
    case 'function_bad_output':
      return 'bad_output';
    case 'function_runtime_missing':
      return 'runtime_missing';
    default:
      return 'error';
  }
}

/** 429 `function_busy` with `Retry-After`. */
function busy(message: string): ServiceError {
  return new ServiceError('function_busy', message, { headers: { 'retry-after': String(BUSY_RETRY_AFTER_SECONDS) } });
}
