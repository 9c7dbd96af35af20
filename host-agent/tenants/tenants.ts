/**
 * The tenants supervisor (issue #4; DESIGN §3 Lifecycle and "Directory layout"): one engine process
 * per running tenant, started and stopped on request, never behind the client's back.
 *
 * - Lifecycle operations on one project (wakeup, sleep, head, snapshot, restore, state corrections) run
 *   one at a time; different projects never wait for each other.
 * - The agent writes the project state to DynamoDB itself, since it knows the truth, with a write
 *   conditioned on the state it expects and on being the project's agent.
 * - Every multi-step change is crash-safe: a pid record under `run/` is written the moment an engine is
 *   spawned, and a restore journal before a restore touches anything; `start()` repairs, adopts or
 *   stops what a killed agent left behind, and then corrects the recorded states.
 * - `liveEndpoint()` answers from memory only (the /v2 forwarding listener calls it per request), and
 *   `onExit()` tells listeners the moment an engine is gone.
 */
import { closeSync, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join, relative, isAbsolute } from 'node:path';
import { enginePortRange } from '../../shared/config.ts';
import { getProject, setProjectState } from '../../shared/db/projects.ts';
import type { ProjectState } from '../../shared/schemas.ts';
import { DATA_PLANE, ENGINE_PIN } from '../../shared/schemas.ts';
import { getSnapshot, latestSnapshotId, newSnapshotId, putSnapshot, type Snapshot, type SnapshotBackup, type SnapshotLineage } from '../../shared/db/snapshots.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import { ID_PATTERNS } from '../../shared/ids.ts';
import type { RecordedState, TenantStateAnswer } from '../../shared/lifecycle.ts';
import { nowIso } from '../../shared/time.ts';
import type { AgentContext } from '../context.ts';
import { checkPin, commandFailure, engineEnvironment, runCommand, type PinCheck } from '../engine-cli.ts';
import { readJsonRecord, removeRecord, renameDurable, writeJsonDurable, writeJsonDurableAsync } from './files.ts';
import { EngineSlots } from './capacity.ts';
import { initDataDir } from './init.ts';
import { dirStamp, layoutOf, RESTORE_STAGING_PREFIX, type Layout } from './layout.ts';
import { TenantLogs } from './logs.ts';
import { PortPool } from './ports.ts';
import {
  adoptProcess,
  isSameProcessAlive,
  probeCapabilities,
  processCommandLine,
  spawnServe,
  stopProcess,
  within,
  type EngineProcess,
  type SpawnedServe,
} from './processes.ts';

/** Lifecycle events for the realtime `system` channel (DESIGN §3 Realtime). */
export type LifecycleEvent = 'project.running' | 'project.sleeping' | 'snapshot.created' | 'project.restored';

/** Receives lifecycle events after each successful transition. Must not throw (errors are swallowed). */
export type EmitLifecycle = (projectId: string, event: LifecycleEvent, payload: Record<string, unknown>) => void;

/** Options of the supervisor. */
export interface TenantsOptions {
  /** Called after each successful transition (default: nothing). */
  emit?: EmitLifecycle;
  /** Poll interval for engines adopted from a previous agent (their exit cannot be awaited). */
  adoptedPollMs?: number;
}

/** Where a running engine listens: what the /v2 forwarding listener connects to. */
export interface LiveEndpoint {
  host: string;
  port: number;
}

/** The answer of the head operation (contract "GET /v0/projects/{id}/head"). */
export type HeadAnswer = Record<string, unknown> & { state: ProjectState; source: 'live_probe' | 'offline_status'; timestamp: string };

/** The answer of a restore (contract "POST /v0/projects/{id}/restore"). */
export interface RestoreAnswer {
  state: ProjectState;
  snapshot_id: string;
  restored_at: string;
  data_dir: string;
  replaced_dir: string | null;
  native: { restore: Record<string, unknown>; backup: SnapshotBackup };
}

/** A running engine of this agent. */
interface Live {
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
interface RunRecord {
  project: string;
  pid: number;
  start_time: string | null;
  host: string;
  port: number;
  data_dir: string;
  started_at: string;
  agent_id: string;
}

const ENGINE_HOST = '127.0.0.1';
const PORT_RETRIES = 3;
const LOG_SWEEP_MS = 10_000;
const LONG_COMMAND_MS = 600_000;
/** engineGone: how often, and how far apart, a refusing engine's process is looked at. */
const GONE_CHECKS = 5;
const GONE_CHECK_MS = 20;

/** The pinned engine's stat identity: a replaced or removed binary is re-checked before the next start. */
function binaryIdentity(bin: string): string | null {
  try {
    const s = statSync(bin);
    if (!s.isFile() || (s.mode & 0o111) === 0) return null;
    return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
  } catch {
    return null;
  }
}

function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}

/** The supervisor of this agent's tenants. */
export class Tenants {
  readonly layout: Layout;
  readonly logs: TenantLogs;
  readonly #ctx: AgentContext;
  readonly #emit: EmitLifecycle;
  readonly #adoptedPollMs: number;
  readonly #ports: PortPool;
  readonly #env: NodeJS.ProcessEnv;
  readonly #live = new Map<string, Live>();
  readonly #tails = new Map<string, Promise<void>>();
  readonly #exitListeners = new Set<(projectId: string) => void>();
  readonly #slots: EngineSlots;
  #pinIdentity: string | null = null;
  #pinCheck: Promise<PinCheck> | null = null;
  #closing = false;
  #sweep: NodeJS.Timeout | undefined;

  constructor(ctx: AgentContext, options: TenantsOptions = {}) {
    this.#ctx = ctx;
    this.#emit = options.emit ?? (() => {});
    this.#adoptedPollMs = options.adoptedPollMs ?? 100;
    this.layout = layoutOf(ctx.root);
    this.logs = new TenantLogs(this.layout, ctx.settings.SVCD_LOG_MAX_BYTES, ctx.now);
    this.#ports = new PortPool(enginePortRange(ctx.settings), ENGINE_HOST);
    this.#env = engineEnvironment(this.layout.compileCache);
    this.#slots = new EngineSlots(ctx.settings.SVCD_AGENT_CAPACITY, () => this.#live.size);
  }

  // ---------------------------------------------------------------------------------------------
  // Read-only views (synchronous, memory only)

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
        this.#onExit(live);
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

  /** Projects with a running engine. */
  runningProjects(): string[] {
    return [...this.#live.keys()];
  }

  // ---------------------------------------------------------------------------------------------
  // Start and stop of the agent

  /**
   * Start-up (issue #4 rule 4): repair interrupted restores, adopt or stop engines left by a previous
   * agent, then correct the recorded state of every tenant this machine holds.
   */
  async start(): Promise<void> {
    const { layout } = this;
    for (const dir of [layout.tenants, layout.snapshots, layout.run, layout.logs, layout.compileCache]) mkdirSync(dir, { recursive: true });
    if (this.#ctx.pin.ok) this.#pinIdentity = binaryIdentity(this.#ctx.engineBin);

    const tenants = readdirSync(layout.tenants).filter((name) => ID_PATTERNS.prj.test(name));
    for (const projectId of tenants) {
      try {
        this.#repairRestore(projectId);
      } catch (err) {
        this.#ctx.log(`agent: repairing the restore of ${projectId} failed: ${(err as Error).message}`);
      }
    }

    const records = readdirSync(layout.run).filter((f) => /^prj_[0-9a-f]{16}\.json$/.test(f));
    await Promise.all(records.map((file) => this.#adoptOrStop(file.slice(0, -'.json'.length))));

    const known = new Set([...tenants, ...this.#live.keys()]);
    await this.#bounded([...known], 8, async (projectId) => {
      try {
        const current = await getProject(this.#ctx.db, projectId);
        if (!current || current.agent_id !== this.#ctx.agentId) return;
        const truth = this.#truth(projectId, current.state);
        if (truth !== current.state) {
          await this.#record(projectId, current, truth);
          this.#ctx.log(`agent: ${projectId} was recorded ${current.state}, is ${truth}: corrected`);
        }
      } catch (err) {
        this.#ctx.log(`agent: reconciling ${projectId} at start failed: ${(err as Error).message}`);
      }
    });

    this.#sweep = setInterval(() => {
      for (const projectId of this.#live.keys()) {
        try {
          this.logs.rotateIfNeeded(projectId);
        } catch (err) {
          this.#ctx.log(`agent: rotating the log of ${projectId} failed: ${(err as Error).message}`);
        }
      }
    }, LOG_SWEEP_MS);
    this.#sweep.unref();
  }

  /**
   * Agent shutdown, in phases: refuse new operations; let operations in flight finish (bounded); stop
   * every engine (SIGTERM, timer, SIGKILL), all at once; record them `sleeping`. Idempotent.
   */
  async stopAll(timeoutMs: number = this.#ctx.settings.SVCD_ENGINE_STOP_TIMEOUT_MS + 5000): Promise<void> {
    this.#closing = true;
    if (this.#sweep) clearInterval(this.#sweep);
    await within(Promise.allSettled([...this.#tails.values()]), timeoutMs);
    const lives = [...this.#live.values()];
    await Promise.all(
      lives.map(async (live) => {
        try {
          await this.#stopEngine(live, 'the host agent is stopping');
        } catch (err) {
          this.#ctx.log(`agent: stopping the engine of ${live.projectId} failed: ${(err as Error).message}`);
          return;
        }
        const write = setProjectState(this.#ctx.db, live.projectId, 'running', 'sleeping', nowIso(this.#ctx.now()), { agentId: this.#ctx.agentId });
        if (!(await within(write, 3000))) this.#ctx.log(`agent: recording ${live.projectId} as sleeping timed out; the next start corrects it`);
      }),
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Lifecycle operations (each answers what the handler needs)

  /** POST wakeup: any state → `running`; initializes the data directory on first start. Idempotent. */
  wakeup(projectId: string, recorded: RecordedState): Promise<TenantStateAnswer> {
    return this.#exclusive(projectId, async () => {
      if (this.#live.has(projectId)) {
        const { answer, changed } = await this.#record(projectId, recorded, 'running');
        if (changed) this.#notify(projectId, 'project.running', { state: 'running' });
        return answer;
      }
      // Refused before anything is written: past the capacity nothing starts (docs/lifecycle.md "Capacity").
      const release = this.#slots.claim(projectId);
      try {
        return await this.#start(projectId, recorded);
      } finally {
        release();
      }
    });
  }

  /** The cold half of wakeup (the caller holds the lock and an engine slot). */
  async #start(projectId: string, recorded: RecordedState): Promise<TenantStateAnswer> {
    await this.#ensurePin();
    mkdirSync(this.layout.tenantDir(projectId), { recursive: true });
    if (!existsSync(this.layout.dataDir(projectId))) {
      await initDataDir(this.layout, projectId, this.#ctx.now(), (dir) => this.#command(projectId, ['init', '--data-dir', dir, '--json'], 'wakeup', this.#startTimeout()));
    }
    // The state is written while the engine boots, not after it: the write leaves the critical path.
    // Until the engine is ready nobody can see the early `running` through the API (GET reconciles
    // under this project's lock, which this wakeup holds), a failed start writes the truth back,
    // and a crash in between is corrected by the next start's reconciliation.
    let recording: Promise<{ answer: TenantStateAnswer; changed: boolean }> | null = null;
    let live: Live;
    try {
      live = await this.#startEngine(projectId, () => {
        recording = this.#record(projectId, recorded, 'running');
        recording.catch(() => {});
      });
    } catch (err) {
      await this.#undoEarlyRecord(projectId, recording);
      throw err;
    }
    let recordedNow: { answer: TenantStateAnswer; changed: boolean };
    try {
      recordedNow = await (recording ?? this.#record(projectId, recorded, 'running'));
    } catch (err) {
      // An error answer must mean "not running": do not leave an engine behind the recorded state.
      await this.#stopEngine(live, 'its running state could not be recorded').catch(() => {});
      throw err;
    }
    this.#notify(projectId, 'project.running', { state: 'running' });
    return recordedNow.answer;
  }

  /** POST sleep: any state → `sleeping`; the engine is stopped gracefully; the data directory stays. Idempotent. */
  sleep(projectId: string, recorded: RecordedState): Promise<TenantStateAnswer> {
    return this.#exclusive(projectId, async () => {
      const live = this.#live.get(projectId);
      if (live) await this.#stopEngine(live, 'sleep');
      const { answer, changed } = await this.#record(projectId, recorded, 'sleeping');
      if (live || changed) this.#notify(projectId, 'project.sleeping', { state: 'sleeping' });
      return answer;
    });
  }

  /**
   * GET project: the recorded state reconciled with the live process (DESIGN §3 Lifecycle). The common
   * case (they agree) costs nothing; a correction is written under the project's lock.
   */
  async reconcile(projectId: string, recorded: RecordedState): Promise<TenantStateAnswer> {
    if (this.#closing) throw errors.orchestrator('the host agent is shutting down');
    if (this.#truth(projectId, recorded.state) === recorded.state) return recorded;
    return this.#exclusive(projectId, () => this.#correct(projectId));
  }

  /** GET head: a live probe of a running engine, or the offline status of a sleeping one. */
  head(projectId: string, recorded: RecordedState): Promise<HeadAnswer> {
    return this.#exclusive(projectId, async () => {
      let state = recorded.state;
      const truth = this.#truth(projectId, state);
      if (truth !== state) state = (await this.#correct(projectId)).state;
      const live = this.#live.get(projectId);
      if (live && !live.stopping) {
        let probe;
        try {
          probe = await probeCapabilities(live.host, live.port, Math.min(this.#startTimeout(), 10_000));
        } catch (err) {
          this.logs.append(projectId, `head: capabilities probe failed: ${(err as Error).message}`);
          throw errors.upstream('the engine did not answer its capabilities probe');
        }
        const minor = headerValue(probe.headers['x-svc-protocol-minor']);
        return {
          state,
          source: 'live_probe',
          engine: this.#ctx.pin.version,
          endpoint: { data_plane: DATA_PLANE, address: `${live.host}:${live.port}`, host: live.host, port: live.port },
          protocol_minor: minor !== null && /^\d+$/.test(minor) ? Number(minor) : minor,
          request_id: headerValue(probe.headers['x-svc-request-id']),
          capabilities: {
            status: probe.status,
            content_type: headerValue(probe.headers['content-type']),
            body_base64: probe.body.toString('base64'),
          },
          timestamp: nowIso(this.#ctx.now()),
        };
      }
      const dataDir = this.layout.dataDir(projectId);
      if (!existsSync(dataDir)) throw new ServiceError('tenant_not_running', 'the tenant has never started: it has nothing to report; wake it up first');
      await this.#ensurePin();
      const status = await this.#command(projectId, ['status', '--data-dir', dataDir, '--json'], 'head', this.#startTimeout());
      const latest = await latestSnapshotId(this.#ctx.db, projectId);
      return {
        state,
        source: 'offline_status',
        engine: this.#ctx.pin.version,
        endpoint: { data_plane: DATA_PLANE, address: null },
        lineage: status,
        ...(latest ? { latest_snapshot: latest } : {}),
        timestamp: nowIso(this.#ctx.now()),
      };
    });
  }

  /** POST snapshots: a verified backup of the sleeping tenant's data directory, recorded per the contract. */
  snapshot(projectId: string, label: string | null): Promise<Snapshot> {
    return this.#exclusive(projectId, async () => {
      if (this.#live.has(projectId)) throw new ServiceError('tenant_running', 'the tenant is running: sleep it before taking a snapshot');
      const dataDir = this.layout.dataDir(projectId);
      if (!existsSync(dataDir)) throw new ServiceError('tenant_not_running', 'the tenant has never started: it has no data directory to snapshot');
      await this.#ensurePin();
      const createdAt = this.#ctx.now();
      const snapshotId = newSnapshotId(createdAt);
      const backupDir = this.layout.backupDir(projectId, snapshotId);
      mkdirSync(this.layout.snapshotRoot(projectId), { recursive: true });
      const status = await this.#command(projectId, ['status', '--data-dir', dataDir, '--json'], 'snapshot', this.#startTimeout());
      const backup = await this.#command(projectId, ['backup', '--data-dir', dataDir, '--out', backupDir, '--json'], 'snapshot', this.#longTimeout());
      const snapshot: Snapshot = {
        id: snapshotId,
        project: projectId,
        label,
        created_at: nowIso(createdAt),
        engine_version: typeof this.#ctx.pin.version?.engine_version === 'string' ? this.#ctx.pin.version.engine_version : ENGINE_PIN,
        source_data_dir: dataDir,
        backup_dir: backupDir,
        lineage: pickLineage(status),
        backup: pickBackup(backup),
      };
      await putSnapshot(this.#ctx.db, snapshot);
      this.logs.append(projectId, `snapshot ${snapshotId} created in ${backupDir}`);
      this.#notify(projectId, 'snapshot.created', { snapshot_id: snapshotId, label, created_at: snapshot.created_at });
      return snapshot;
    });
  }

  /**
   * POST restore: the engine restores the snapshot into a fresh directory, then two renames swap it in
   * (`data/` → `replaced/<ts>-<snap>/`, fresh → `data/`). The journal written first lets `start()`
   * finish or undo a restore a crash interrupted. Nothing is deleted; the tenant stays asleep.
   */
  restore(projectId: string, recorded: RecordedState, snapshotId: string): Promise<RestoreAnswer> {
    return this.#exclusive(projectId, async () => {
      const snapshot = await getSnapshot(this.#ctx.db, projectId, snapshotId);
      if (!snapshot) throw errors.notFound(`snapshot ${snapshotId} not found`);
      if (this.#live.has(projectId)) throw new ServiceError('tenant_running', 'the tenant is running: sleep it before restoring');
      await this.#ensurePin();
      const tenantDir = this.layout.tenantDir(projectId);
      const dataDir = this.layout.dataDir(projectId);
      const name = `${dirStamp(this.#ctx.now())}-${snapshotId}`;
      const fresh = join(tenantDir, `${RESTORE_STAGING_PREFIX}${name}`);
      const replaced = join(this.layout.replacedRoot(projectId), name);
      mkdirSync(tenantDir, { recursive: true });
      // The engine restores into a fresh directory and needs no lock on data/; the swap does. An engine
      // this agent does not know of (none should exist) would answer lock_held here: 409, nothing moved.
      if (existsSync(dataDir)) await this.#command(projectId, ['status', '--data-dir', dataDir, '--json'], 'restore', this.#startTimeout());
      writeJsonDurable(this.layout.restoreJournal(projectId), { snapshot_id: snapshotId, fresh, replaced, started_at: nowIso(this.#ctx.now()) });
      let restoreOut: Record<string, unknown>;
      try {
        restoreOut = await this.#command(projectId, ['restore', '--backup', snapshot.backup_dir, '--target', fresh, '--json'], 'restore', this.#longTimeout());
      } catch (err) {
        this.#repairRestore(projectId);
        throw err;
      }
      // The commit point: once data/ has moved aside, start() rolls the swap forward.
      const hadData = existsSync(dataDir);
      if (hadData) {
        mkdirSync(this.layout.replacedRoot(projectId), { recursive: true });
        renameDurable(dataDir, replaced);
      }
      renameDurable(fresh, dataDir);
      removeRecord(this.layout.restoreJournal(projectId));
      const restoredAt = nowIso(this.#ctx.now());
      this.logs.append(projectId, `restored snapshot ${snapshotId}; previous data directory retained in ${hadData ? replaced : '(none)'}`);
      const { answer } = await this.#record(projectId, recorded, 'sleeping');
      this.#notify(projectId, 'project.restored', { snapshot_id: snapshotId, restored_at: restoredAt });
      return {
        state: answer.state,
        snapshot_id: snapshotId,
        restored_at: restoredAt,
        data_dir: dataDir,
        replaced_dir: hadData ? replaced : null,
        native: { restore: restoreOut, backup: snapshot.backup },
      };
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Internals

  /** Runs `fn` after every earlier operation on the same project; other projects run concurrently. */
  #exclusive<T>(projectId: string, fn: () => Promise<T>): Promise<T> {
    if (this.#closing) return Promise.reject(errors.orchestrator('the host agent is shutting down'));
    const previous = this.#tails.get(projectId) ?? Promise.resolve();
    // Operations queued before shutdown began still run: stopAll() waits for them (bounded).
    const result = previous.then(fn);
    const tail = result.then(
      () => {},
      () => {},
    );
    this.#tails.set(projectId, tail);
    void tail.then(() => {
      if (this.#tails.get(projectId) === tail) this.#tails.delete(projectId);
    });
    return result;
  }

  /**
   * The state the live process and the disk say the project is in, given what is recorded. `data/`
   * exists only once an init succeeded (./init.ts), so it is the usable directory: without an engine,
   * `sleeping` when there is one; `stopped` stays `stopped` only without one (a crash can land between
   * init and the state write). `sleeping` without one is kept: sleep of a never-started tenant answers
   * it (docs/lifecycle.md "States").
   */
  #truth(projectId: string, recorded: ProjectState): ProjectState {
    if (this.#live.has(projectId)) return 'running';
    if (recorded === 'running') return existsSync(this.layout.dataDir(projectId)) ? 'sleeping' : 'stopped';
    if (recorded === 'stopped' && existsSync(this.layout.dataDir(projectId))) return 'sleeping';
    return recorded;
  }

  /** After a failed start: if `running` was already recorded, record the truth again. Never throws. */
  async #undoEarlyRecord(projectId: string, recording: Promise<{ answer: TenantStateAnswer; changed: boolean }> | null): Promise<void> {
    if (!recording) return;
    const written = await recording.catch(() => null);
    if (!written || written.answer.state !== 'running') return;
    try {
      await this.#record(projectId, written.answer, this.#truth(projectId, 'running'));
    } catch (err) {
      this.#ctx.log(`agent: undoing the running state of ${projectId} failed: ${(err as Error).message}; GET corrects it`);
    }
  }

  /** Re-reads the recorded state and writes the truth when they differ (caller holds the lock). */
  async #correct(projectId: string): Promise<TenantStateAnswer> {
    const current = await getProject(this.#ctx.db, projectId);
    if (!current) throw errors.notFound(`project ${projectId} not found`);
    if (current.agent_id !== this.#ctx.agentId) throw errors.orchestrator(`project ${projectId} is not hosted by this agent`);
    const truth = this.#truth(projectId, current.state);
    const { answer, changed } = await this.#record(projectId, current, truth);
    if (changed && truth === 'running') this.#notify(projectId, 'project.running', { state: truth });
    if (changed && truth === 'sleeping') this.#notify(projectId, 'project.sleeping', { state: truth });
    return answer;
  }

  /**
   * Records `next` with a write conditioned on the expected state and on this agent hosting the
   * project. When the expectation was stale, re-reads once and retries.
   */
  async #record(projectId: string, recorded: RecordedState, next: ProjectState): Promise<{ answer: TenantStateAnswer; changed: boolean }> {
    if (recorded.state === next) return { answer: { state: recorded.state, updated_at: recorded.updated_at }, changed: false };
    const { db, agentId } = this.#ctx;
    const at = nowIso(this.#ctx.now());
    let written = await setProjectState(db, projectId, recorded.state, next, at, { agentId });
    if (!written) {
      const current = await getProject(db, projectId);
      if (!current) throw errors.notFound(`project ${projectId} not found`);
      if (current.agent_id !== agentId) throw errors.orchestrator(`project ${projectId} is not hosted by this agent`);
      if (current.state === next) return { answer: { state: current.state, updated_at: current.updated_at }, changed: false };
      written = await setProjectState(db, projectId, current.state, next, at, { agentId });
      if (!written) throw errors.conflict('the project state changed concurrently; retry');
    }
    return { answer: { state: written.state, updated_at: written.updated_at }, changed: true };
  }

  #notify(projectId: string, event: LifecycleEvent, payload: Record<string, unknown>): void {
    try {
      this.#emit(projectId, event, { project: projectId, ...payload });
    } catch (err) {
      this.#ctx.log(`agent: lifecycle event ${event} for ${projectId} not emitted: ${(err as Error).message}`);
    }
  }

  #startTimeout(): number {
    return this.#ctx.settings.SVCD_ENGINE_START_TIMEOUT_MS;
  }

  #longTimeout(): number {
    return Math.max(this.#startTimeout(), LONG_COMMAND_MS);
  }

  /**
   * The pin check before each start (issue #4 rule 2). The version command is re-run only when the
   * binary's identity changed or the last check failed, so a healthy start costs one stat().
   */
  async #ensurePin(): Promise<void> {
    const bin = this.#ctx.engineBin;
    const identity = binaryIdentity(bin);
    if (identity === null) {
      this.#ctx.pin = { ok: false, version: null, reason: `engine binary ${bin} is missing or not executable` };
      this.#pinIdentity = null;
    } else if (!this.#ctx.pin.ok || identity !== this.#pinIdentity) {
      this.#pinCheck ??= checkPin(bin, this.#startTimeout()).finally(() => {
        this.#pinCheck = null;
      });
      const pin = await this.#pinCheck;
      this.#ctx.pin = pin;
      this.#pinIdentity = identity;
      if (!pin.ok) this.#ctx.log(`agent: engine pin check failed: ${pin.reason}`);
    }
    if (!this.#ctx.pin.ok) {
      // The reason (with host paths) goes to the agent's log; the client learns the class of fault.
      throw errors.orchestrator(`this host cannot run tenants: the engine binary is missing or is not version ${ENGINE_PIN}`);
    }
  }

  /** Runs a one-shot engine command for a project; its output is logged, its failure mapped. */
  async #command(projectId: string, args: string[], what: string, timeoutMs: number): Promise<Record<string, unknown>> {
    let result;
    try {
      result = await runCommand(this.#ctx.engineBin, args, this.#env, timeoutMs);
    } catch (err) {
      this.#ctx.log(`agent: engine ${args[0]} for ${projectId} could not run: ${(err as Error).message}`);
      throw errors.orchestrator('this host cannot run tenants: the engine binary cannot be run');
    }
    if (result.code === 0 && result.json && !('error' in result.json)) {
      this.logs.append(projectId, `engine ${args[0]}: ok`);
      return result.json;
    }
    const detail = result.json ? JSON.stringify(result.json) : '(no JSON document)';
    this.logs.append(projectId, `engine ${args.join(' ')}: failed (${result.timedOut ? 'timed out' : `exit ${result.code ?? result.signal}`}): ${detail}`);
    this.logs.appendRaw(projectId, result.stderr);
    throw commandFailure(result, what);
  }

  /**
   * Starts `serve` on a free port and waits until it is ready: the ready line, then an answered
   * capabilities probe, all within `SVCD_ENGINE_START_TIMEOUT_MS`; otherwise the process is killed
   * and the answer is 502. A port lost to another program between probe and bind is retried.
   */
  async #startEngine(projectId: string, onSpawned: () => void = () => {}): Promise<Live> {
    const deadline = Date.now() + this.#startTimeout();
    const avoid = new Set<number>();
    const dataDir = this.layout.dataDir(projectId);
    for (let attempt = 1; ; attempt++) {
      if (this.#closing) throw errors.orchestrator('the host agent is shutting down');
      const port = await this.#ports.acquire(avoid);
      let spawned: SpawnedServe;
      const fd = this.logs.openAppend(projectId);
      try {
        spawned = spawnServe({
          bin: this.#ctx.engineBin,
          dataDir,
          host: ENGINE_HOST,
          port,
          maxBodyBytes: this.#ctx.settings.SVCD_DATAPLANE_MAX_BYTES,
          env: this.#env,
          stderrFd: fd,
          onOutput: (text) => this.logs.appendRaw(projectId, text),
        });
      } finally {
        closeSync(fd);
      }
      const startedAt = nowIso(this.#ctx.now());
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
          agent_id: this.#ctx.agentId,
        };
        recordWritten = writeJsonDurableAsync(this.layout.runRecord(projectId), record).then(
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
        this.#track(live);
        this.logs.append(projectId, `engine serving on ${ENGINE_HOST}:${port} (pid ${spawned.process.pid})`);
        return live;
      }
      const how = await stopProcess(spawned.process, 0);
      spawned.process.dispose();
      if (how !== 'lingering') removeRecord(this.layout.runRecord(projectId));
      this.#ports.release(port);
      const addressInUse = /EADDRINUSE|address already in use/i.test(spawned.earlyOutput());
      this.logs.append(projectId, `engine (pid ${spawned.process.pid}) start failed on port ${port}: ${failure}`);
      if (addressInUse && attempt < PORT_RETRIES && Date.now() < deadline) {
        avoid.add(port);
        continue;
      }
      if (spawned.process.pid <= 0) throw errors.orchestrator('this host cannot run tenants: the engine binary cannot be run');
      throw errors.upstream(`the engine failed to start: ${failure}`);
    }
  }

  /** Null when the engine is ready; otherwise why not (for the client: no engine output in it). */
  async #awaitReady(spawned: SpawnedServe, port: number, deadline: number): Promise<string | null> {
    const limit = this.#startTimeout();
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

  /** Registers a running engine and watches its exit. */
  #track(live: Live): void {
    this.#live.set(live.projectId, live);
    this.#ports.claim(live.port);
    void live.proc.exited.then(() => this.#onExit(live));
  }

  /** Forgets an exited engine; an exit nobody asked for is logged and the recorded state corrected. */
  #onExit(live: Live): void {
    if (live.cleaned) return;
    live.cleaned = true;
    if (this.#live.get(live.projectId) === live) this.#live.delete(live.projectId);
    this.#ports.release(live.port);
    live.proc.dispose();
    removeRecordQuietly(this.layout.runRecord(live.projectId), this.#ctx.log);
    for (const listener of this.#exitListeners) {
      try {
        listener(live.projectId);
      } catch (err) {
        this.#ctx.log(`agent: an engine-exit listener failed: ${(err as Error).message}`);
      }
    }
    if (live.stopping) return;
    this.logs.append(live.projectId, `engine (pid ${live.proc.pid}) exited without being asked to`);
    this.#ctx.log(`agent: the engine of ${live.projectId} exited unexpectedly`);
    if (this.#closing) return;
    this.#exclusive(live.projectId, async () => {
      if (!this.#live.has(live.projectId)) await this.#correct(live.projectId);
    }).catch((err) => this.#ctx.log(`agent: recording the exit of ${live.projectId} failed: ${(err as Error).message}`));
  }

  /** Stops an engine gracefully (SIGTERM, `SVCD_ENGINE_STOP_TIMEOUT_MS`, SIGKILL) and waits for its exit. */
  async #stopEngine(live: Live, why: string): Promise<void> {
    live.stopping = true;
    this.logs.append(live.projectId, `stopping engine (pid ${live.proc.pid}): ${why}`);
    const how = await stopProcess(live.proc, this.#ctx.settings.SVCD_ENGINE_STOP_TIMEOUT_MS);
    if (how === 'lingering') {
      this.logs.append(live.projectId, `engine (pid ${live.proc.pid}) did not exit even after SIGKILL`);
      throw errors.upstream('the engine did not stop');
    }
    if (how === 'killed') this.logs.append(live.projectId, `engine (pid ${live.proc.pid}) ignored SIGTERM and was killed`);
    this.#onExit(live);
  }

  /** Adopts the engine a pid record names when it is alive and answering; stops it otherwise. */
  async #adoptOrStop(projectId: string): Promise<void> {
    const path = this.layout.runRecord(projectId);
    const raw = readJsonRecord(path);
    const pid = typeof raw?.pid === 'number' ? raw.pid : null;
    const port = typeof raw?.port === 'number' ? raw.port : null;
    const startTime = typeof raw?.start_time === 'string' ? raw.start_time : null;
    const dataDir = this.layout.dataDir(projectId);
    if (pid === null || port === null || !isSameProcessAlive(pid, startTime)) {
      removeRecordQuietly(path, this.#ctx.log);
      if (pid !== null) this.logs.append(projectId, `engine (pid ${pid}) of a previous agent is gone`);
      return;
    }
    const commandLine = processCommandLine(pid);
    if (commandLine !== null && !commandLine.includes(dataDir)) {
      // Not an engine of this tenant (a pid reused where start times are unknown): never signal it.
      removeRecordQuietly(path, this.#ctx.log);
      return;
    }
    const proc = adoptProcess(pid, startTime, this.#adoptedPollMs);
    let answering = false;
    try {
      answering = (await probeCapabilities(ENGINE_HOST, port, 2000)).status === 200;
    } catch {
      answering = false;
    }
    if (answering && proc.alive()) {
      const live: Live = {
        projectId,
        host: ENGINE_HOST,
        port,
        proc,
        startedAt: typeof raw?.started_at === 'string' ? raw.started_at : nowIso(this.#ctx.now()),
        adopted: true,
        stopping: false,
        cleaned: false,
      };
      this.#track(live);
      this.logs.append(projectId, `engine (pid ${pid}) on port ${port} adopted from a previous agent`);
      this.#ctx.log(`agent: adopted the engine of ${projectId} (pid ${pid}, port ${port})`);
      return;
    }
    this.logs.append(projectId, `engine (pid ${pid}) of a previous agent does not answer: stopping it`);
    const how = await stopProcess(proc, this.#ctx.settings.SVCD_ENGINE_STOP_TIMEOUT_MS);
    proc.dispose();
    if (how !== 'lingering') removeRecordQuietly(path, this.#ctx.log);
  }

  /**
   * Finishes or undoes a restore a crash interrupted, from its journal and what is on disk. Before the
   * commit point (data/ still in place) the fresh directory is moved aside to `unapplied/`; after it
   * (data/ moved to replaced/) the fresh directory is renamed into data/. Nothing is deleted.
   */
  #repairRestore(projectId: string): void {
    const journalPath = this.layout.restoreJournal(projectId);
    const journal = readJsonRecord(journalPath);
    if (!journal) {
      removeRecord(journalPath);
      return;
    }
    const tenantDir = this.layout.tenantDir(projectId);
    const dataDir = this.layout.dataDir(projectId);
    const fresh = typeof journal.fresh === 'string' && isInside(tenantDir, journal.fresh) ? journal.fresh : null;
    const replaced = typeof journal.replaced === 'string' && isInside(tenantDir, journal.replaced) ? journal.replaced : null;
    const freshThere = fresh !== null && existsSync(fresh);
    if (!existsSync(dataDir)) {
      if (freshThere) {
        renameDurable(fresh, dataDir);
        this.logs.append(projectId, `interrupted restore of ${String(journal.snapshot_id)} completed at start`);
      } else if (replaced !== null && existsSync(replaced)) {
        renameDurable(replaced, dataDir);
        this.logs.append(projectId, `interrupted restore of ${String(journal.snapshot_id)} undone at start`);
      }
    } else if (freshThere) {
      const unapplied = join(this.layout.unappliedRoot(projectId), basename(fresh).replace(/^restoring-/, ''));
      mkdirSync(dirname(unapplied), { recursive: true });
      renameDurable(fresh, unapplied);
      this.logs.append(projectId, `interrupted restore of ${String(journal.snapshot_id)} undone; its directory kept in ${unapplied}`);
    }
    removeRecord(journalPath);
  }

  async #bounded<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
    let next = 0;
    const workers = Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    });
    await Promise.all(workers);
  }
}

function removeRecordQuietly(path: string, log: (line: string) => void): void {
  try {
    removeRecord(path);
  } catch (err) {
    log(`agent: removing ${path} failed: ${(err as Error).message}`);
  }
}

function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

function headerValue(value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(', ') : value;
}

function requireField<T>(output: Record<string, unknown>, name: string, check: (v: unknown) => v is T, what: string): T {
  const value = output[name];
  if (!check(value)) throw errors.upstream(`the engine's ${what} output lacks a valid ${name}`);
  return value;
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);
const isStr = (v: unknown): v is string => typeof v === 'string';

/** The contract's `lineage` object, every value copied from the engine's status output. */
function pickLineage(status: Record<string, unknown>): SnapshotLineage {
  return {
    catalog_version: requireField(status, 'catalog_version', isInt, 'status'),
    directory_lineage: requireField(status, 'directory_lineage', isStr, 'status'),
    logical_time_micros: requireField(status, 'logical_time_micros', isInt, 'status'),
    root_digest: requireField(status, 'root_digest', isStr, 'status'),
    visible_csn: requireField(status, 'visible_csn', isInt, 'status'),
  };
}

/** The contract's `backup` object, every value copied from the engine's backup output. */
function pickBackup(backup: Record<string, unknown>): SnapshotBackup {
  return {
    backup_path: requireField(backup, 'backup_path', isStr, 'backup'),
    checkpoint_digest: requireField(backup, 'checkpoint_digest', isStr, 'backup'),
    file_count: requireField(backup, 'file_count', isInt, 'backup'),
    total_bytes: requireField(backup, 'total_bytes', isInt, 'backup'),
    status: requireField(backup, 'status', (v): v is 'created' | 'verified' => v === 'created' || v === 'verified', 'backup'),
    visible_csn: requireField(backup, 'visible_csn', isInt, 'backup'),
  };
}
