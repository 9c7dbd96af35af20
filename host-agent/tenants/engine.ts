/**
 * This agent's running engines (docs/lifecycle.md "Starting an engine", "Stopping"): start on a free
 * port until ready, graceful stop, exit tracking, and one-shot engine commands. A pid record under
 * `run/` is written the moment an engine is spawned, so a restarted agent always finds what this one
 * started (./adoption.ts). `liveEndpoint()` answers from memory only: the /v2 listener calls it per
 * request.
 */
import { closeSync } from 'node:fs';
import type { Settings } from '../../shared/config.ts';
import { enginePortRange } from '../../shared/config.ts';
import { errors, ServiceError } from '../../shared/errors.ts';
import { nowIso } from '../../shared/time.ts';
import { commandFailure, engineEnvironment, runCommand } from '../engine-cli.ts';
import { parseResult, type EngineCommand } from '../engine-commands.ts';
import type { EngineLaunch } from './engine-launch.ts';
import { removeRecord, writeJsonDurableAsync } from './files.ts';
import type { Layout } from './layout.ts';
import type { TenantLogs } from './logs.ts';
import { PortPool } from './ports.ts';
import { isSameProcessAlive, probeCapabilities, spawnServe, stopProcess, type EngineProcess, type SpawnedServe } from './processes.ts';
import { shuttingDown } from './queue.ts';

/** The address engines listen on. */
export const ENGINE_HOST = '127.0.0.1';

/** Where a running engine listens: what the /v2 forwarding listener connects to. */
export interface LiveEndpoint {
  host: string;
  port: number;
}

/** A running engine of this agent. */
export interface Live {
  projectId: string;
  host: string;
  port: number;
  proc: EngineProcess;
  startedAt: string;
  adopted: boolean;
  stopping: boolean;
  cleaned: boolean;
}

/** What a pid record under `run/` holds. */
export interface RunRecord {
  project: string;
  pid: number;
  start_time: string | null;
  host: string;
  port: number;
  data_dir: string;
  started_at: string;
  agent_id: string;
}

/** What the engines need. */
export interface EnginesDeps {
  settings: Settings;
  /** How engine processes are started: their user, their cgroup, the binary (./engine-launch.ts). */
  launch: EngineLaunch;
  agentId: string;
  layout: Layout;
  logs: TenantLogs;
  now: () => number;
  log: (line: string) => void;
  /** True once the agent shuts down: no engine starts any more, and an exit is not corrected. */
  closing: () => boolean;
  /** Called after an engine exited that nobody asked to stop. */
  onUnexpectedExit: (projectId: string) => void;
}

const PORT_RETRIES = 3;
const LONG_COMMAND_MS = 600_000;
/** engineGone: how often, and how far apart, a refusing engine's process is looked at. */
const GONE_CHECKS = 5;
const GONE_CHECK_MS = 20;

/** The engines of this agent, one per running tenant. */
export class Engines {
  readonly #deps: EnginesDeps;
  readonly #live = new Map<string, Live>();
  readonly #ports: PortPool;
  readonly #env: NodeJS.ProcessEnv;
  readonly #exitListeners = new Set<(projectId: string) => void>();

  constructor(deps: EnginesDeps) {
    this.#deps = deps;
    this.#ports = new PortPool(enginePortRange(deps.settings), ENGINE_HOST);
    this.#env = engineEnvironment(deps.layout.compileCache);
  }

  /** `SVCD_ENGINE_START_TIMEOUT_MS`: the bound of a start and of a short engine command. */
  get startTimeoutMs(): number {
    return this.#deps.settings.SVCD_ENGINE_START_TIMEOUT_MS;
  }

  /** The bound of a backup or a restore. */
  get longTimeoutMs(): number {
    return Math.max(this.startTimeoutMs, LONG_COMMAND_MS);
  }

  /** The engine of `projectId`, stopping or not. */
  get(projectId: string): Live | undefined {
    return this.#live.get(projectId);
  }

  /** How many engines run. */
  get size(): number {
    return this.#live.size;
  }

  /** Projects with a running engine. */
  projects(): string[] {
    return [...this.#live.keys()];
  }

  /** Every running engine. */
  all(): Live[] {
    return [...this.#live.values()];
  }

  /** Where the project's engine listens, or null when it has no running engine (or it is stopping). */
  liveEndpoint(projectId: string): LiveEndpoint | null {
    const live = this.#live.get(projectId);
    if (!live || live.stopping) return null;
    return { host: live.host, port: live.port };
  }

  /**
   * Whether the engine the /v2 listener reached at `endpoint` is gone, asked after it refused or reset
   * a connection (error path only: it reads /proc, and waits up to ~100 ms for a process in the middle
   * of exiting). A dead engine's exit is recorded at once (listeners told, the state corrected in the
   * background) instead of when it would be noticed: an adopted engine's exit is polled, and even a
   * child's can arrive after the refusal. False while the engine still runs, or when another engine
   * of the project serves by now.
   */
  async engineGone(projectId: string, endpoint: LiveEndpoint): Promise<boolean> {
    for (let check = 1; ; check++) {
      const live = this.#live.get(projectId);
      if (!live || live.stopping) return true;
      if (live.host !== endpoint.host || live.port !== endpoint.port) return false;
      // A zombie (killed, not yet reaped) has no start time in /proc: it counts as gone.
      if (!live.proc.alive() || !isSameProcessAlive(live.proc.pid, live.proc.startTime)) {
        this.#exited(live);
        return true;
      }
      if (check >= GONE_CHECKS) return false;
      await sleepMs(GONE_CHECK_MS);
    }
  }

  /** Calls `listener(projectId)` whenever an engine exits, expectedly or not. Answers the unsubscribe. */
  onExit(listener: (projectId: string) => void): () => void {
    this.#exitListeners.add(listener);
    return () => this.#exitListeners.delete(listener);
  }

  /**
   * Starts `serve` on a free port and waits until it is ready: the ready line, then an answered
   * capabilities probe, all within `SVCD_ENGINE_START_TIMEOUT_MS`; otherwise the process is killed
   * and the answer is 502. A port lost to another program between probe and bind is retried.
   * `onSpawned` is called once the first process exists.
   */
  async start(projectId: string, onSpawned: () => void = () => {}): Promise<Live> {
    const { layout, logs, settings } = this.#deps;
    const deadline = Date.now() + this.startTimeoutMs;
    const avoid = new Set<number>();
    const dataDir = layout.dataDir(projectId);
    this.prepare(projectId);
    for (let attempt = 1; ; attempt++) {
      if (this.#deps.closing()) throw shuttingDown();
      const port = await this.#ports.acquire(avoid);
      let spawned: SpawnedServe;
      const fd = logs.openAppend(projectId);
      try {
        spawned = spawnServe({
          command: (args) => this.#argv(projectId, args),
          dataDir,
          host: ENGINE_HOST,
          port,
          maxBodyBytes: settings.SVCD_DATAPLANE_MAX_BYTES,
          statementTimeoutMs: settings.SVCD_ENGINE_STATEMENT_TIMEOUT_MS,
          env: this.#env,
          stderrFd: fd,
          onOutput: (text) => logs.appendRaw(projectId, text),
        });
      } catch (err) {
        this.#ports.release(port);
        this.#deps.launch.release(projectId);
        throw err;
      } finally {
        closeSync(fd);
      }
      const startedAt = nowIso(this.#deps.now());
      // The pid record is written (durably) while the engine boots; it must exist before the engine
      // counts as running, so a restarted agent always finds what this one started.
      let recordWritten: Promise<unknown> = Promise.resolve();
      if (spawned.process.pid > 0) {
        const record: RunRecord = {
          project: projectId,
          pid: spawned.process.pid,
          start_time: spawned.process.startTime,
          host: ENGINE_HOST,
          port,
          data_dir: dataDir,
          started_at: startedAt,
          agent_id: this.#deps.agentId,
        };
        recordWritten = writeJsonDurableAsync(layout.runRecord(projectId), record).then(
          () => null,
          (err: Error) => err,
        );
        if (attempt === 1) onSpawned();
      }
      let failure = await this.#awaitReady(spawned, port, deadline);
      const recordError = await recordWritten;
      if (failure === null && recordError instanceof Error) failure = `its pid record could not be written (${recordError.message})`;
      if (failure === null) {
        const live: Live = { projectId, host: ENGINE_HOST, port, proc: spawned.process, startedAt, adopted: false, stopping: false, cleaned: false };
        this.track(live);
        logs.append(projectId, `engine serving on ${ENGINE_HOST}:${port} (pid ${spawned.process.pid})`);
        return live;
      }
      const how = await stopProcess(spawned.process, 0);
      spawned.process.dispose();
      this.#deps.launch.release(projectId);
      if (how !== 'lingering') removeRecord(layout.runRecord(projectId));
      this.#ports.release(port);
      const addressInUse = /EADDRINUSE|address already in use/i.test(spawned.earlyOutput());
      logs.append(projectId, `engine (pid ${spawned.process.pid}) start failed on port ${port}: ${failure}`);
      if (addressInUse && attempt < PORT_RETRIES && Date.now() < deadline) {
        avoid.add(port);
        continue;
      }
      if (spawned.process.pid <= 0) throw errors.orchestrator('this host cannot run tenants: the engine binary cannot be run');
      throw errors.upstream(`the engine failed to start: ${failure}`);
    }
  }

  /** Registers a running engine (started here or adopted) and watches its exit. */
  track(live: Live): void {
    this.#live.set(live.projectId, live);
    this.#ports.claim(live.port);
    void live.proc.exited.then(() => this.#exited(live));
  }

  /** Stops an engine gracefully (SIGTERM, `SVCD_ENGINE_STOP_TIMEOUT_MS`, SIGKILL) and waits for its exit. */
  async stop(live: Live, why: string): Promise<void> {
    const { logs } = this.#deps;
    live.stopping = true;
    logs.append(live.projectId, `stopping engine (pid ${live.proc.pid}): ${why}`);
    const how = await stopProcess(live.proc, this.#deps.settings.SVCD_ENGINE_STOP_TIMEOUT_MS);
    if (how === 'lingering') {
      logs.append(live.projectId, `engine (pid ${live.proc.pid}) did not exit even after SIGKILL`);
      throw errors.upstream('the engine did not stop');
    }
    if (how === 'killed') logs.append(live.projectId, `engine (pid ${live.proc.pid}) ignored SIGTERM and was killed`);
    this.#exited(live);
  }

  /**
   * Runs one-shot engine command `cmd` (host-agent/engine-commands.ts) for a project with `args`;
   * answers its typed result. Its output is logged; its failure, or a document its declaration does
   * not describe, is mapped to the service's error (docs/engine.md "Exit codes").
   */
  async run<A, R>(projectId: string, cmd: EngineCommand<A, R>, args: A, what: string, timeoutMs: number): Promise<R> {
    const { logs, launch } = this.#deps;
    const argv = cmd.argv(args);
    this.prepare(projectId);
    let result;
    try {
      const [file, ...rest] = this.#argv(projectId, argv);
      result = await runCommand(file!, rest, this.#env, timeoutMs);
    } catch (err) {
      if (err instanceof ServiceError) throw err;
      this.#deps.log(`agent: engine ${cmd.name} for ${projectId} could not run: ${(err as Error).message}`);
      throw errors.orchestrator('this host cannot run tenants: the engine binary cannot be run');
    } finally {
      launch.release(projectId);
    }
    if (result.code === 0 && result.json && !('error' in result.json)) {
      const parsed = parseResult(cmd, result.json);
      if (parsed.ok) {
        logs.append(projectId, `engine ${cmd.name}: ok`);
        return parsed.value;
      }
      logs.append(projectId, `engine ${argv.join(' ')}: ${parsed.problem}: ${JSON.stringify(result.json)}`);
      throw errors.upstream(parsed.problem);
    }
    const detail = result.json ? JSON.stringify(result.json) : '(no JSON document)';
    logs.append(projectId, `engine ${argv.join(' ')}: failed (${result.timedOut ? 'timed out' : `exit ${result.code ?? result.signal}`}): ${detail}`);
    logs.appendRaw(projectId, result.stderr);
    throw commandFailure(result, what);
  }


  /** Makes a directory the engine builds in, only the engine user's (./engine-launch.ts `privateDir`). */
  privateDir(dir: string): void {
    this.#deps.launch.privateDir(dir);
  }

  /** The project's directories as its engine needs them (./engine-launch.ts `prepareProject`); 502 when they cannot be. */
  prepare(projectId: string): void {
    try {
      this.#deps.launch.prepareProject(this.#deps.layout, projectId);
    } catch (err) {
      this.#deps.log(`agent: preparing the directories of ${projectId} for its engine failed: ${(err as Error).message}`);
      throw errors.upstream('the engine cannot be started: its directories could not be prepared');
    }
  }

  /** The argv of an engine process of the project (its cgroup made first); a refusal is 503 or 502. */
  #argv(projectId: string, args: string[]): string[] {
    const { launch, log } = this.#deps;
    if (launch.problem) throw errors.orchestrator('this host cannot run tenants: engines cannot be started as their user; see the agent log');
    try {
      return launch.command(args, projectId).argv;
    } catch (err) {
      log(`agent: the cgroup of ${projectId}'s engine could not be made: ${(err as Error).message}`);
      throw errors.upstream('the engine cannot be started: its cgroup could not be made');
    }
  }

  /** Null when the engine is ready; otherwise why not (for the client: no engine output in it). */
  async #awaitReady(spawned: SpawnedServe, port: number, deadline: number): Promise<string | null> {
    const limit = this.startTimeoutMs;
    let line;
    try {
      const ready = await Promise.race([spawned.ready, sleepMs(Math.max(0, deadline - Date.now())).then(() => null)]);
      if (ready === null) return `no ready line within ${limit} ms`;
      line = ready;
    } catch (err) {
      return (err as Error).message;
    }
    const listenPort = Number(line.listen.slice(line.listen.lastIndexOf(':') + 1));
    if (listenPort !== port) return `the engine listens on ${line.listen}, not on the port it was given`;
    try {
      const probe = await probeCapabilities(ENGINE_HOST, port, Math.max(1, deadline - Date.now()));
      if (probe.status !== 200) return `the capabilities probe answered ${probe.status}`;
    } catch (err) {
      return Date.now() >= deadline ? `no capabilities answer within ${limit} ms` : `the capabilities probe failed (${(err as Error).message})`;
    }
    return null;
  }

  /** Forgets an exited engine; an exit nobody asked for is logged and handed on for correction. */
  #exited(live: Live): void {
    if (live.cleaned) return;
    live.cleaned = true;
    const { logs, log } = this.#deps;
    if (this.#live.get(live.projectId) === live) this.#live.delete(live.projectId);
    this.#ports.release(live.port);
    live.proc.dispose();
    this.#deps.launch.release(live.projectId);
    removeRecordQuietly(this.#deps.layout.runRecord(live.projectId), log);
    for (const listener of this.#exitListeners) {
      try {
        listener(live.projectId);
      } catch (err) {
        log(`agent: an engine-exit listener failed: ${(err as Error).message}`);
      }
    }
    if (live.stopping) return;
    logs.append(live.projectId, `engine (pid ${live.proc.pid}) exited without being asked to`);
    log(`agent: the engine of ${live.projectId} exited unexpectedly`);
    if (this.#deps.closing()) return;
    this.#deps.onUnexpectedExit(live.projectId);
  }
}

/** Removes a record file, logging (not throwing) a failure. */
export function removeRecordQuietly(path: string, log: (line: string) => void): void {
  try {
    removeRecord(path);
  } catch (err) {
    log(`agent: removing ${path} failed: ${(err as Error).message}`);
  }
}

/** Resolves after `ms` without holding the process open. */
export function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
