/**
 * The function runtime of a host agent (docs/functions.md): deploys, deletes, invocations and logs of
 * the functions of the projects placed on this agent. The agent is the one writer of its projects'
 * function items, so what it remembers of them (each function's current version) is what DynamoDB
 * holds; it is read once per function and re-read after REFRESH_MS in any case.
 *
 * Deploys and deletes of one function run one at a time (in arrival order); invocations never wait
 * for them: an invocation runs the version current when it began.
 */
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
import { forward, UpstreamError, upstreamRequestHeaders } from '../../shared/http/forward.ts';
import { ID_PATTERNS, randomHex } from '../../shared/ids.ts';
import { FUNCTION_HEADERS, type FunctionSettings } from '../../shared/schemas/functions.ts';
import type { KeyRing } from '../../shared/secrets-crypto.ts';
import { nowIso } from '../../shared/time.ts';
import { invocationEnv, SecretSets, type SecretSet } from './env.ts';
import { Launcher } from './launch.ts';
import { FunctionLogStore, LineSplitter, Redactor } from './logs.ts';
import { ModuleFiles, newModuleBlobName, type ModuleBlobStore } from './modules.ts';
import { PoolFullError, WorkerPool, type Lease } from './pool.ts';
import { ProjectQueue } from '../tenants/queue.ts';
import { describeExit, FunctionWorker, ModuleStartError, RuntimeMissingError, type WorkerLaunch } from './worker.ts';

/** Age after which a function's remembered head is read again. */
const REFRESH_MS = 60_000;
/** Seconds a client told `function_busy` is asked to wait (`Retry-After`). */
export const BUSY_RETRY_AFTER_SECONDS = 1;

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

/** An invocation as the internal route hands it over: the request is streamed on to the worker. */
export interface InvocationInput {
  projectId: string;
  name: string;
  /** What follows `/invoke` in the path (raw, possibly empty), and the query with its `?`. */
  path: string;
  origin: string;
  /**
   * The length the client declared (the handlers' `x-svc-fn-length`), else the length the hop from
   * the handlers declared for the same bytes, or null (the body streams without one).
   */
  length: number | null;
  requestId: string;
}

interface Remembered {
  head: FunctionRecord;
  readAt: number;
}

/** The agent's functions. */
export class FunctionRuntime {
  readonly #deps: FunctionRuntimeDeps;
  readonly #area: string;
  readonly #launcher: Launcher;
  readonly #modules: ModuleFiles;
  readonly #secretSets: SecretSets;
  readonly #pool: WorkerPool;
  readonly logs: FunctionLogStore;
  readonly #heads = new Map<string, Remembered>();
  /** Deploys and deletes of one function, one at a time (keyed `<project>/<name>`). */
  readonly #serial = new ProjectQueue();
  /** Invocations in flight, per function (`<project>/<name>`) and per project. */
  readonly #running = new Map<string, number>();
  readonly #runningByProject = new Map<string, number>();
  /** Projects deleted while this agent runs: nothing of theirs is served any more. */
  readonly #gone = new Set<string>();

  constructor(deps: FunctionRuntimeDeps) {
    this.#deps = deps;
    const { settings, now, log } = deps;
    this.#area = join(deps.root, 'functions');
    this.#launcher = new Launcher({
      node: settings.SVCD_FUNCTION_NODE ?? process.execPath,
      sandbox: settings.SVCD_FUNCTION_SANDBOX,
      dir: join(this.#area, '.runtime'),
      now,
      log,
    });
    this.#modules = new ModuleFiles(this.#area, deps.blobs);
    this.#secretSets = new SecretSets(deps, now);
    this.#pool = new WorkerPool({ max: settings.SVCD_FUNCTION_MAX_WORKERS, idleMs: settings.SVCD_FUNCTION_IDLE_MS, now });
    this.logs = new FunctionLogStore(this.#area, settings.SVCD_FUNCTION_LOG_MAX_BYTES, now);
  }

  /**
   * Probes the runtime in the background and removes what a crash left: temporary module files (now),
   * version items of deleted functions with their blobs (in the background). Never rejects.
   */
  start(): Promise<void> {
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

  /** Worker counts and pool counters, and the idle workers of `fn` (`<project>/<name>`) or of all (tests, benchmark). */
  poolState(fn?: string): { idle: number; busy: number; started: number; reused: number; retired: number; idlePids: number[] } {
    return { ...this.#pool.counts(), ...this.#pool.stats, idlePids: this.#pool.idlePids(fn) };
  }

  /** A secret of the project was put or deleted: the next invocation runs with the new set. */
  secretsChanged(projectId: string): void {
    this.#secretSets.invalidate(projectId);
  }

  /** The project was deleted: its workers end (after their invocation), nothing of it is served again. */
  forgetProject(projectId: string): void {
    this.#gone.add(projectId);
    this.#secretSets.invalidate(projectId);
    for (const fn of [...this.#heads.keys()]) if (fn.startsWith(`${projectId}/`)) this.#heads.delete(fn);
    this.#pool.retireProject(projectId);
  }

  /** Refuses new deploys and deletes, lets those under way finish, then ends every worker. */
  async stop(): Promise<void> {
    await this.#serial.close();
    await this.#pool.close();
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
   * Deploys a new version: the module is received, checked in a worker of its own (with the
   * project's environment), stored in the blob store, then recorded. Answers the new head and whether
   * the function was created.
   */
  deploy(input: DeployInput): Promise<{ head: FunctionRecord; created: boolean }> {
    const { projectId, name } = input;
    return this.#serial.run(`${projectId}/${name}`, async () => {
      if (this.#gone.has(projectId)) throw errors.notFound(`project ${projectId} not found`);
      const launch = await this.#launch();
      const received = await this.#modules.receive(projectId, input.body, input.maxBytes, input.length);
      try {
        const set = await this.#secretSets.get(projectId);
        const env = invocationEnv(set, { projectId, functionName: name, cloudOrigin: input.origin });
        await this.#check(launch, received.path, input.settings.memory_mb, env, input.origin, set);
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
   * Deletes a function: from the answer on it is 404 to every route; invocations in flight finish
   * on their workers, which then exit. Its versions, their blobs and its logs are removed after the
   * head. Answers the head as it was.
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
      this.#pool.retire(fn);
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
   * Runs one invocation: `req` is streamed to a worker of the function's current version and the
   * worker's answer streamed into `res`. Throws a ServiceError when nothing has been answered yet
   * (the caller renders it); once the answer has begun, a failure cuts it short.
   */
  async invoke(req: IncomingMessage, res: ServerResponse, input: InvocationInput): Promise<void> {
    const { projectId, name } = input;
    const fn = `${projectId}/${name}`;
    const head = await this.current(projectId, name);
    if ((this.#running.get(fn) ?? 0) >= head.max_concurrency) {
      throw busy(`function ${name} is already running ${head.max_concurrency} invocations (its max_concurrency)`);
    }
    this.#count(fn, projectId, +1);
    try {
      const launch = await this.#launch();
      const set = await this.#secretSets.get(projectId);
      const lease = await this.#acquire(launch, head, set, input.origin);
      await this.#run(lease, head, req, res, input);
    } finally {
      this.#count(fn, projectId, -1);
    }
  }

  async #acquire(launch: WorkerLaunch, head: FunctionRecord, set: SecretSet, origin: string): Promise<Lease> {
    const { project: projectId, name } = head;
    const key = `${head.generation}:${head.version}:${set.fingerprint}:${origin}`;
    const slots = Math.min(this.#deps.settings.SVCD_FUNCTION_WORKER_SLOTS, head.max_concurrency);
    try {
      return await this.#pool.acquire(`${projectId}/${name}`, key, slots, async () => {
        const modulePath = await this.#modules.ensure(projectId, head);
        const env = invocationEnv(set, { projectId, functionName: name, cloudOrigin: origin });
        const output = this.#output(head, set);
        const worker = await FunctionWorker.start(launch, {
          mode: 'serve',
          modulePath,
          memoryMb: head.memory_mb,
          env,
          origin,
          startTimeoutMs: this.#deps.settings.SVCD_FUNCTION_START_TIMEOUT_MS,
          slots,
          onOutput: output.push,
        });
        void worker.exited.then((exit) => {
          output.end();
          if (exit.signal !== 'SIGKILL') this.logs.append(projectId, name, head.version, 'agent', [`worker ${worker.pid} exited (${describeExit(exit)})`]);
        });
        return worker;
      });
    } catch (err) {
      if (err instanceof PoolFullError) throw busy(err.message);
      if (err instanceof RuntimeMissingError) {
        this.#launcher.invalidate();
        throw new ServiceError('function_runtime_missing', err.message);
      }
      if (err instanceof ModuleStartError) {
        this.logs.append(projectId, name, head.version, 'agent', [`worker start failed: ${new Redactor(set.secrets).redact(err.problem)}`]);
        throw new ServiceError('function_bad_output', 'the function failed to start (see its logs)');
      }
      throw err;
    }
  }

  async #run(lease: Lease, head: FunctionRecord, req: IncomingMessage, res: ServerResponse, input: InvocationInput): Promise<void> {
    const { worker } = lease.pooled;
    let timedOut = false;
    // Past the deadline the worker is killed; one still running other invocations is retired instead
    // (this invocation's connection cut), and killed once those have ended (docs/functions.md "Timeouts").
    const timer = setTimeout(() => {
      timedOut = true;
      const alone = lease.pooled.active === 1;
      this.logs.append(head.project, head.name, head.version, 'agent', [
        `invocation ${input.requestId} ran past its timeout of ${head.timeout_ms} ms: worker ${worker.pid} ${alone ? 'killed' : 'retired, killed once its other invocations end'}`,
      ]);
      if (alone) void worker.kill();
      else void lease.client.destroy().catch(() => {});
    }, head.timeout_ms);
    let reusable = false;
    try {
      const headers = upstreamRequestHeaders(req, DROPPED_HEADERS);
      // A HEAD reaches the worker as a marked GET (FUNCTION_HEADERS.method), whether it came as one or so.
      const head = req.method === 'HEAD' || (req.method === 'GET' && req.headers[FUNCTION_HEADERS.method] === 'HEAD');
      const method = head ? 'GET' : (req.method ?? 'GET');
      if (head) headers.push(FUNCTION_HEADERS.method, 'HEAD');
      const hasBody = method !== 'GET';
      // The one Content-Length of the worker's request (RFC 9110 §8.6), for the body it is sent with.
      if (hasBody && input.length !== null) headers.push('content-length', String(input.length));
      await forward(lease.client, req, res, { method, path: input.path, headers, body: hasBody ? req : null });
      // Ended, not cut short (a destroyed answer means the worker or the client went away).
      reusable = !timedOut && res.writableEnded && worker.alive() && worker.connected(lease.client);
    } catch (err) {
      if (!(err instanceof UpstreamError)) throw err;
      if (timedOut) throw new ServiceError('function_timeout', `function ${head.name} did not answer within its timeout of ${head.timeout_ms} ms`);
      const exit = await Promise.race([worker.exited, new Promise<null>((r) => setTimeout(() => r(null), 200))]);
      throw new ServiceError('function_bad_output', `the worker of function ${head.name} ${exit ? `exited (${describeExit(exit)})` : 'failed'} before answering (see its logs)`);
    } finally {
      clearTimeout(timer);
      this.#pool.release(lease, reusable);
    }
  }

  /** The console of a worker into the function's log, line by line, secrets redacted. */
  #output(head: FunctionRecord, set: SecretSet): { push: (stream: 'stdout' | 'stderr', text: string) => void; end: () => void } {
    const redactor = new Redactor(set.secrets);
    const splitters = {
      stdout: this.#splitter(head, redactor, 'stdout'),
      stderr: this.#splitter(head, redactor, 'stderr'),
    };
    return {
      push: (stream, text) => splitters[stream].push(text),
      end: () => {
        splitters.stdout.end();
        splitters.stderr.end();
      },
    };
  }

  #splitter(head: FunctionRecord, redactor: Redactor, stream: 'stdout' | 'stderr'): { push(text: string): void; end(): void } {
    const lines: string[] = [];
    const splitter = new LineSplitter(redactor, (line) => lines.push(line));
    const flush = () => {
      this.logs.append(head.project, head.name, head.version, stream, lines.splice(0));
    };
    return {
      push(text) {
        splitter.push(text);
        flush();
      },
      end() {
        splitter.end();
        flush();
      },
    };
  }

  /** Loads the module in a worker of its own and ends it; 400 naming the problem when it fails. */
  async #check(launch: WorkerLaunch, modulePath: string, memoryMb: number, env: Record<string, string>, origin: string, set: SecretSet): Promise<void> {
    try {
      const worker = await FunctionWorker.start(launch, {
        mode: 'check',
        modulePath,
        memoryMb,
        env,
        origin,
        startTimeoutMs: this.#deps.settings.SVCD_FUNCTION_START_TIMEOUT_MS,
        slots: 0,
        onOutput: () => {},
      });
      await worker.kill();
    } catch (err) {
      if (err instanceof ModuleStartError) throw errors.invalid(`body: ${new Redactor(set.secrets).redact(err.problem)}`);
      if (err instanceof RuntimeMissingError) {
        this.#launcher.invalidate();
        throw new ServiceError('function_runtime_missing', err.message);
      }
      throw err;
    }
  }

  async #launch(): Promise<WorkerLaunch> {
    const launch = await this.#launcher.launch();
    if (typeof launch === 'string') throw new ServiceError('function_runtime_missing', `functions cannot run on host agent ${this.#deps.agentId}: ${launch}`);
    return launch;
  }

  /**
   * Removes version items with their blobs, then the local copies no remaining version refers to. A
   * running worker keeps the module it has loaded; a copy needed again is fetched again.
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
 * Headers of the agent's request never copied to the worker's: the client's credential, the
 * service's own internal headers, and the `Content-Length` of the hop from the handlers, which
 * frames that hop only (a fixed-length body crosses it with one, an empty POST with 0); the
 * worker's request is given the client's declared length instead (InvocationInput.length), once:
 * two `Content-Length` fields make undici refuse the request before it is sent (RFC 9110 §8.6).
 */
const DROPPED_HEADERS: ReadonlySet<string> = new Set(['authorization', 'content-length', ...Object.values(FUNCTION_HEADERS)]);

/** 429 `function_busy` with `Retry-After`. */
function busy(message: string): ServiceError {
  return new ServiceError('function_busy', message, { headers: { 'retry-after': String(BUSY_RETRY_AFTER_SECONDS) } });
}
