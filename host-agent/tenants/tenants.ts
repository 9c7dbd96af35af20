/**
 * The tenants supervisor (docs/lifecycle.md "The host agent's side"): one engine process per running
 * tenant, started and stopped on request, never behind the client's back. This facade orders the
 * parts: the per-project queue (./queue.ts), the recorded state and its corrections (./state.ts), the
 * pin check (./pin.ts), the engines (./engine.ts), adoption (./adoption.ts), head (./head.ts),
 * snapshots (./snapshot.ts) and their deletion (./snapshot-delete.ts, ./holds.ts), restore and its
 * repair (./restore.ts), the previous directories restore keeps and their freeing (./replaced.ts),
 * and a project's deletion (./delete.ts).
 * It answers plain values; the internal routes shape the answers (host-agent/routes/answers.ts).
 *
 * Every multi-step change is crash-safe: a pid record under `run/` is written the moment an engine is
 * spawned, and a restore journal before a restore touches anything; `start()` repairs, adopts or
 * stops what a killed agent left behind, and then corrects the recorded states.
 */
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import type { Settings } from '../../shared/config.ts';
import type { Db } from '../../shared/db/client.ts';
import { getProject } from '../../shared/db/projects.ts';
import type { Snapshot } from '../../shared/db/snapshots.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import { ID_PATTERNS } from '../../shared/ids.ts';
import type { RecordedState, ReplacedDir, ReplacedPage, TenantStateAnswer } from '../../shared/schemas/lifecycle.ts';
import type { ProjectDeletedAnswer } from '../../shared/schemas/project-delete.ts';
import { adoptOrStop } from './adoption.ts';
import { EngineSlots } from './capacity.ts';
import type { DeletionRequest } from './delete.ts';
import { ProjectDeletions } from './deletions.ts';
import { Engines, type Live, type LiveEndpoint } from './engine.ts';
import { EngineLaunch } from './engine-launch.ts';
import { headOf, type Head } from './head.ts';
import { SnapshotHolds } from './holds.ts';
import { layoutOf, type Layout } from './layout.ts';
import { TenantLogs } from './logs.ts';
import type { EnginePin } from './pin.ts';
import { bounded, within } from './processes.ts';
import { ProjectQueue, shuttingDown } from './queue.ts';
import { discardReplaced, listReplaced, repairDiscards, type Deletion } from './replaced.ts';
import { repairRestore, restoreSnapshot, type RestoreDeps, type Restored } from './restore.ts';
import type { TenantParts } from './parts.ts';
import { Activity } from './idle.ts';
import { heldSnapshot, sleepTenant, stopEvery, type AfterSleep, type SleepParts } from './sleep.ts';
import { coldStart } from './wakeup.ts';
import { removeSnapshot } from './snapshot-delete.ts';
import { RecordedStates, type EmitLifecycle } from './state.ts';

export type { LiveEndpoint } from './engine.ts';
export type { Head } from './head.ts';
export type { EmitLifecycle, LifecycleEvent } from './state.ts';

/** What the supervisor needs, all given at construction. */
export interface TenantsDeps {
  settings: Settings;
  db: Db;
  agentId: string;
  /** Absolute `SVCD_ROOT`. */
  root: string;
  /** Absolute path of the engine binary. */
  engineBin: string;
  /** How engines are started (./engine-launch.ts); default: one made from the settings. */
  launch?: EngineLaunch;
  /** The pin check, already run once at the agent's start. */
  pin: EnginePin;
  log: (line: string) => void;
  now: () => number;
  /** Called after each successful transition (default: nothing). */
  emit?: EmitLifecycle;
  /** Poll interval for engines adopted from a previous agent (their exit cannot be awaited). */
  adoptedPollMs?: number;
  /** Function invocations of a project in flight now (host-agent/functions/runtime.ts; default: none). */
  inFlightInvocations?: (projectId: string) => number;
  fetchBackup?: RestoreDeps['fetchBackup']; // a backup this machine lacks, from the off-machine store (./restore.ts)
  /** In the project's turn after each sleep, once it is answered: the automatic backup (./auto-backup.ts). */
  afterSleep?: AfterSleep;
}

/** A restore as done: the state recorded after it, and what it did. */
export interface RestoreResult extends Restored {
  state: TenantStateAnswer['state'];
}

const LOG_SWEEP_MS = 10_000;

/** The supervisor of this agent's tenants. */
export class Tenants {
  readonly layout: Layout;
  readonly logs: TenantLogs;
  /** How this agent starts engines: their user and cgroups (./engine-launch.ts). */
  readonly launch: EngineLaunch;
  /** `/v2` traffic per engine, which the /v2 listener marks and the automatic sleep reads (./idle.ts). */
  readonly activity: Activity;
  readonly #deps: TenantsDeps;
  readonly #queue = new ProjectQueue();
  readonly #engines: Engines;
  readonly #states: RecordedStates;
  readonly #slots: EngineSlots;
  readonly #holds = new SnapshotHolds();
  readonly #deletions: ProjectDeletions;
  #sweep: NodeJS.Timeout | undefined;

  constructor(deps: TenantsDeps) {
    this.#deps = deps;
    const { settings, log, now } = deps;
    this.layout = layoutOf(deps.root);
    this.logs = new TenantLogs(this.layout, settings.SVCD_LOG_MAX_BYTES, now);
    this.activity = new Activity(now);
    this.launch = deps.launch ?? new EngineLaunch({ settings, agentId: deps.agentId, engineBin: deps.engineBin, log });
    this.#engines = new Engines({
      settings,
      launch: this.launch,
      agentId: deps.agentId,
      layout: this.layout,
      logs: this.logs,
      now,
      log,
      closing: () => this.#queue.closed,
      onUnexpectedExit: (projectId) => this.#recordExit(projectId),
    });
    this.#states = new RecordedStates({
      db: deps.db,
      agentId: deps.agentId,
      now,
      log,
      emit: deps.emit ?? (() => {}),
      facts: (projectId) => ({ running: this.#engines.get(projectId) !== undefined, hasData: existsSync(this.layout.dataDir(projectId)) }),
    });
    this.#slots = new EngineSlots(settings.SVCD_AGENT_CAPACITY, () => this.#engines.size);
    this.#deletions = new ProjectDeletions({
      ...deps,
      layout: this.layout,
      queue: this.#queue,
      engines: this.#engines,
      states: this.#states,
      busyWith: (projectId) => this.busyWith(projectId),
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Read-only views (synchronous, memory only)

  /** Where the project's engine listens, or null when it has no running engine (or it is stopping). */
  liveEndpoint(projectId: string): LiveEndpoint | null {
    return this.#engines.liveEndpoint(projectId);
  }

  /** Whether the engine the /v2 listener reached at `endpoint` is gone (./engine.ts `engineGone`). */
  engineGone(projectId: string, endpoint: LiveEndpoint): Promise<boolean> {
    return this.#engines.engineGone(projectId, endpoint);
  }

  /** Calls `listener(projectId)` whenever an engine exits, expectedly or not. Answers the unsubscribe. */
  onExit(listener: (projectId: string) => void): () => void {
    return this.#engines.onExit(listener);
  }

  /** Projects with a running engine. */
  runningProjects(): string[] {
    return this.#engines.projects();
  }

  // ---------------------------------------------------------------------------------------------
  // Start and stop of the agent

  /**
   * Start-up (docs/lifecycle.md "Crash safety: agent start"): repair interrupted restores, adopt or
   * stop engines left by a previous agent, then correct the recorded state of every tenant this
   * machine holds, and take up the project deletions a crash interrupted.
   */
  async start(): Promise<void> {
    const { layout, logs } = this;
    const { log, settings } = this.#deps;
    for (const dir of [layout.tenants, layout.snapshots, layout.run, layout.logs, layout.compileCache]) mkdirSync(dir, { recursive: true });
    // Engines run as their own user: it must reach the layout and own its compile cache.
    this.launch.prepareLayout(layout);

    const tenants = readdirSync(layout.tenants).filter((name) => ID_PATTERNS.prj.test(name));
    for (const projectId of tenants) {
      try {
        repairRestore(layout, logs, projectId);
      } catch (err) {
        log(`agent: repairing the restore of ${projectId} failed: ${(err as Error).message}`);
      }
      try {
        await repairDiscards(this.#parts(), projectId);
      } catch (err) {
        log(`agent: finishing the freeing of previous directories of ${projectId} failed: ${(err as Error).message}; retried at the next start`);
      }
    }

    const records = readdirSync(layout.run).filter((f) => /^prj_[0-9a-f]{16}\.json$/.test(f));
    const adoption = {
      layout,
      logs,
      now: this.#deps.now,
      log,
      pollMs: this.#deps.adoptedPollMs ?? 100,
      stopTimeoutMs: settings.SVCD_ENGINE_STOP_TIMEOUT_MS,
      track: (live: Live) => this.#engines.track(live),
    };
    await Promise.all(records.map((file) => adoptOrStop(adoption, file.slice(0, -'.json'.length))));
    // Groups a previous run left empty go; an adopted engine's keeps its process, and its group.
    this.launch.sweep();

    const known = new Set([...tenants, ...this.#engines.projects()]);
    await bounded([...known], 8, (projectId) => this.#states.correctAtStart(projectId));
    await this.#deletions.resume();

    this.#sweep = setInterval(() => {
      for (const projectId of this.#engines.projects()) {
        try {
          logs.rotateIfNeeded(projectId);
        } catch (err) {
          log(`agent: rotating the log of ${projectId} failed: ${(err as Error).message}`);
        }
      }
    }, LOG_SWEEP_MS);
    this.#sweep.unref();
  }

  /**
   * Agent shutdown, in phases: refuse new operations; let operations in flight finish (bounded); stop
   * every engine (SIGTERM, timer, SIGKILL), all at once; record them `sleeping`. Idempotent.
   */
  async stopAll(timeoutMs: number = this.#deps.settings.SVCD_ENGINE_STOP_TIMEOUT_MS + 5000): Promise<void> {
    if (this.#sweep) clearInterval(this.#sweep);
    await within(this.#queue.close(), timeoutMs);
    await stopEvery(this.#sleepParts());
    this.launch.sweep();
  }

  // ---------------------------------------------------------------------------------------------
  // Lifecycle operations

  /** Wakeup: any state → `running`; initializes the data directory on first start. Idempotent. */
  wakeup(projectId: string, recorded: RecordedState): Promise<TenantStateAnswer> {
    return this.#queue.run(projectId, async () => {
      if (this.#engines.get(projectId)) {
        const { answer, changed } = await this.#states.record(projectId, recorded, 'running');
        if (changed) this.#states.notify(projectId, 'project.running', { state: 'running' });
        return answer;
      }
      // Refused before anything is written: past the capacity nothing starts (docs/lifecycle.md "Capacity").
      const release = this.#slots.claim(projectId);
      try {
        return await coldStart({ layout: this.layout, now: this.#deps.now, pin: this.#deps.pin, engines: this.#engines, states: this.#states }, projectId, recorded);
      } finally {
        release();
      }
    });
  }

  /** Sleep: any state → `sleeping`; the engine is stopped gracefully; the data directory stays. Idempotent (./sleep.ts). */
  sleep(projectId: string, recorded: RecordedState): Promise<TenantStateAnswer> {
    return sleepTenant(this.#sleepParts(), projectId, recorded, { why: 'sleep' }) as Promise<TenantStateAnswer>;
  }

  /** The automatic sleep of an idle tenant (./idle.ts): `sleep`, if `stillIdle()` holds in its turn; null when it did not. */
  sleepIdle(projectId: string, recorded: RecordedState, stillIdle: () => boolean, why: string): Promise<TenantStateAnswer | null> {
    return sleepTenant(this.#sleepParts(), projectId, recorded, { why, stillIdle });
  }

  /**
   * GET project of a record not marked kept: the recorded state reconciled with the live process
   * (docs/lifecycle.md "Reconciliation"). When they agree the record is marked kept, so the next GET
   * reads it without asking; a correction is written under the project's queue.
   */
  async reconcile(projectId: string, recorded: RecordedState): Promise<TenantStateAnswer> {
    if (this.#queue.closed) throw shuttingDown();
    if (this.#states.truth(projectId, recorded.state) === recorded.state) {
      await this.#states.keep(projectId, recorded);
      return recorded;
    }
    return this.#queue.run(projectId, () => this.#states.correct(projectId));
  }

  /**
   * An engine exited without being asked to: its state is recorded at once (the record GET answers,
   * docs/lifecycle.md "Reconciliation"), and again after a growing pause while DynamoDB refuses, for
   * as long as the agent runs; a project that is gone or no longer here ends it.
   */
  #recordExit(projectId: string, attempt = 0): void {
    const { log } = this.#deps;
    this.#queue
      .run(projectId, async () => {
        if (!this.#engines.get(projectId)) await this.#states.correct(projectId);
      })
      .catch((err: unknown) => {
        log(`agent: recording the exit of ${projectId} failed: ${(err as Error).message}`);
        if (this.#queue.closed || (err instanceof ServiceError && err.code !== 'conflict')) return;
        setTimeout(() => this.#recordExit(projectId, attempt + 1), Math.min(30_000, 250 * 2 ** attempt)).unref();
      });
  }

  /** Head: a live probe of a running engine, or the offline status of a sleeping one. */
  head(projectId: string, recorded: RecordedState): Promise<Head> {
    return this.#queue.run(projectId, async () => {
      let state = recorded.state;
      if (this.#states.truth(projectId, state) !== state) state = (await this.#states.correct(projectId)).state;
      return headOf(this.#parts(), projectId, state);
    });
  }

  /** Snapshot: a verified backup of the sleeping tenant's data directory, recorded per the contract. */
  snapshot(projectId: string, label: string | null): Promise<Snapshot> {
    return this.#queue.run(projectId, () => heldSnapshot(this.#sleepParts(), projectId, label));
  }

  /** Restore: the snapshot swapped in as the data directory (./restore.ts); the tenant stays asleep. */
  restore(projectId: string, recorded: RecordedState, snapshotId: string): Promise<RestoreResult> {
    // Held from the request on, queued or running: its deletion is refused meanwhile (./holds.ts).
    const release = this.#holds.hold(projectId, snapshotId);
    return this.#queue
      .run(projectId, async () => {
        const restored = await restoreSnapshot(this.#parts(), projectId, snapshotId);
        const { answer } = await this.#states.record(projectId, recorded, 'sleeping');
        this.#states.notify(projectId, 'project.restored', { snapshot_id: snapshotId, restored_at: restored.restoredAt });
        return { state: answer.state, ...restored };
      })
      .finally(release);
  }

  /**
   * Deletes a snapshot: its row with a receipt, then its backup directory (./snapshot-delete.ts).
   * 409 `conflict` at once while a restore of it is asked for or running, or while it is being taken.
   */
  deleteSnapshot(projectId: string, snapshotId: string, deletion: Deletion): Promise<Snapshot> {
    if (this.#holds.held(projectId, snapshotId)) {
      return Promise.reject(errors.conflict(`snapshot ${snapshotId} is being restored or taken: retry once that has finished`));
    }
    return this.#queue.run(projectId, () => removeSnapshot(this.#parts(), projectId, snapshotId, deletion));
  }

  /** Whether a restore is asked for or running, or a snapshot being taken, for the project. */
  snapshotsBusy(projectId: string): boolean {
    return this.#holds.busy(projectId);
  }

  /** One page of the project's previous data directories (./replaced.ts); a read of the disk only. */
  replaced(projectId: string, limit: number, after?: string): Promise<ReplacedPage> {
    if (this.#queue.closed) return Promise.reject(shuttingDown());
    return listReplaced(this.layout, projectId, limit, after);
  }

  /** Frees one previous data directory, receipted (./replaced.ts), after any restore of the project in flight. */
  discardReplaced(projectId: string, name: string, deletion: Deletion): Promise<ReplacedDir> {
    return this.#queue.run(projectId, () => discardReplaced(this.#parts(), projectId, name, deletion));
  }

  /**
   * What keeps the project from being deleted right now, or null (docs/lifecycle.md "Deleting a
   * project"): a snapshot being taken, a restore asked for or running. The one check a project's
   * deletion makes, before its turn and again in it; function invocations in flight belong here too.
   */
  busyWith(projectId: string): string | null {
    if (this.snapshotsBusy(projectId)) return 'a snapshot or restore of the project is in progress';
    if ((this.#deps.inFlightInvocations?.(projectId) ?? 0) > 0) return 'a function invocation of the project is in progress';
    return null;
  }

  /**
   * Deletes the project (./delete.ts; docs/lifecycle.md "Deleting a project"): 409 `conflict` at
   * once while `busyWith` names something. In its turn: stops its engine, commits the deletion
   * (from then on the project is 404 everywhere, and every later operation on it here is refused),
   * hands its key ids to `forget` (the /v2 key cache and realtime streams drop them), and removes
   * the rest. Past the commit point the deletion stands: what fails is retried in the background,
   * and at the next start.
   */
  deleteProject(projectId: string, request: DeletionRequest, forget: (keyIds: string[]) => void): Promise<ProjectDeletedAnswer> {
    return this.#deletions.delete(projectId, request, forget);
  }

  /** Runs `work` in the project's turn with the supervisor's parts: the moves (host-agent/moves/, docs/durability.md). */
  exclusive<T>(projectId: string, work: (parts: TenantParts) => Promise<T>, { reinstate = false } = {}): Promise<T> {
    if (reinstate) this.#queue.reinstate(projectId); // a project that moved away and comes back
    return this.#queue.run(projectId, () => work({ ...this.#parts(), states: this.#states, queue: this.#queue }));
  }

  /** What a sleep and a snapshot need (./sleep.ts). */
  #sleepParts(): SleepParts {
    return { ...this.#parts(), queue: this.#queue, states: this.#states, holds: this.#holds, afterSleep: this.#deps.afterSleep };
  }

  /** What head, snapshot, restore and the deletions need. */
  #parts() {
    const { db, now, pin, log, fetchBackup } = this.#deps;
    return { db, layout: this.layout, logs: this.logs, now, pin, log, engines: this.#engines, fetchBackup };
  }
}
