/**
 * The recorded state of a project and its corrections (docs/lifecycle.md "States"). The agent writes
 * the state to DynamoDB itself, since it knows the truth, with a write conditioned on the state it
 * expects and on being the project's agent; what the engine processes and the disk say wins over
 * what is recorded. A state it has seen hold is marked kept (`state_kept`, docs/lifecycle.md
 * "Reconciliation"): the agent answers for it from then on, correcting it whenever an engine exits,
 * so GET reads it without asking.
 */
import type { Log } from '../../shared/log.ts';
import { getProject, keepProjectState, setProjectState } from '../../shared/db/projects.ts';
import type { Db } from '../../shared/db/client.ts';
import { errors } from '../../shared/errors.ts';
import type { RecordedState, TenantStateAnswer } from '../../shared/schemas/lifecycle.ts';
import type { ProjectState } from '../../shared/schemas/projects.ts';
import { nowIso } from '../../shared/time.ts';

/** Lifecycle events for the realtime `system` channel (docs/realtime.md). */
export type LifecycleEvent = 'project.running' | 'project.sleeping' | 'snapshot.created' | 'project.restored';

/** Receives lifecycle events after each successful transition. Must not throw (errors are swallowed). */
export type EmitLifecycle = (projectId: string, event: LifecycleEvent, payload: Record<string, unknown>) => void;

/** What this machine says of a project: an engine of it runs; its data directory exists. */
export interface Facts {
  running: boolean;
  hasData: boolean;
}

/**
 * The state the live process and the disk say the project is in, given what is recorded. `data/`
 * exists only once an init succeeded (./init.ts), so it is the usable directory: without an engine,
 * `sleeping` when there is one; `stopped` stays `stopped` only without one (a crash can land between
 * init and the state write). `sleeping` without one is kept: sleep of a never-started tenant answers
 * it (docs/lifecycle.md "States").
 */
export function truthOf(recorded: ProjectState, facts: Facts): ProjectState {
  if (facts.running) return 'running';
  if (recorded === 'running') return facts.hasData ? 'sleeping' : 'stopped';
  if (recorded === 'stopped' && facts.hasData) return 'sleeping';
  return recorded;
}

/** The event a correction to `state` announces, if any. */
export function eventOfState(state: ProjectState): LifecycleEvent | null {
  if (state === 'running') return 'project.running';
  if (state === 'sleeping') return 'project.sleeping';
  return null;
}

/** A state write's outcome: the state as now recorded, and whether this write changed it. */
export interface Recorded {
  answer: TenantStateAnswer;
  changed: boolean;
}

/** What the recorded states need. */
export interface StatesDeps {
  db: Db;
  agentId: string;
  now: () => number;
  log: Log;
  emit: EmitLifecycle;
  /** What this machine says of the project now. */
  facts: (projectId: string) => Facts;
}

/** Reads, writes and corrects the recorded states of this agent's projects, and announces transitions. */
export class RecordedStates {
  readonly #deps: StatesDeps;

  constructor(deps: StatesDeps) {
    this.#deps = deps;
  }

  /** The state this machine says the project is in, given what is recorded. */
  truth(projectId: string, recorded: ProjectState): ProjectState {
    return truthOf(recorded, this.#deps.facts(projectId));
  }

  /**
   * Records `next` with a write conditioned on the expected state and on this agent hosting the
   * project, marked kept: the truth as of now. When the expectation was stale, re-reads once and
   * retries. `early` is a wakeup's `running` written while its engine boots: not yet true, so
   * written unmarked even when the record already says `running` (GET asks the agent meanwhile,
   * which waits for the wakeup), and marked by `keep` once the engine is ready.
   */
  async record(projectId: string, recorded: RecordedState, next: ProjectState, { early = false } = {}): Promise<Recorded> {
    if (recorded.state === next && !early) return { answer: { state: recorded.state, updated_at: recorded.updated_at }, changed: false };
    const { db, agentId } = this.#deps;
    const at = nowIso(this.#deps.now());
    const options = { agentId, kept: !early };
    let from = recorded.state;
    let written = await setProjectState(db, projectId, from, next, at, options);
    if (!written) {
      const current = await this.#hosted(projectId);
      if (current.state === next && !early) return { answer: { state: current.state, updated_at: current.updated_at }, changed: false };
      from = current.state;
      written = await setProjectState(db, projectId, from, next, at, options);
      if (!written) throw errors.conflict('the project state changed concurrently; retry');
    }
    return { answer: { state: written.state, updated_at: written.updated_at }, changed: written.state !== from };
  }

  /**
   * Marks the record `judged` kept, having seen it hold (docs/lifecycle.md "Reconciliation"); only
   * that very record, so a write that came meanwhile stays unmarked. Never throws: an unmarked
   * record is only slower to read (GET asks the agent, which marks it then).
   */
  async keep(projectId: string, judged: TenantStateAnswer): Promise<void> {
    try {
      await keepProjectState(this.#deps.db, projectId, judged, this.#deps.agentId);
    } catch (err) {
      this.#deps.log(`agent: marking the state of ${projectId} kept failed: ${(err as Error).message}; the next GET marks it`);
    }
  }

  /**
   * Re-reads the recorded state and writes the truth when they differ, or marks it kept when it
   * holds unmarked (the caller holds the project's queue).
   */
  async correct(projectId: string): Promise<TenantStateAnswer> {
    const current = await this.#hosted(projectId);
    const truth = this.truth(projectId, current.state);
    const { answer, changed } = await this.record(projectId, current, truth);
    if (truth === current.state && !current.state_kept) await this.keep(projectId, answer);
    // A correction is an operator's event (docs/observability.md "Lifecycle events").
    if (changed) this.#deps.log(`agent: ${projectId} was recorded ${current.state}, is ${truth}: corrected`, { level: 'info', event: 'reconcile', project_id: projectId, from: current.state, to: truth });
    const event = eventOfState(truth);
    if (changed && event) this.notify(projectId, event, { state: truth });
    return answer;
  }

  /** At agent start: corrects each project this agent hosts whose recorded state the machine contradicts. Never throws. */
  async correctAtStart(projectId: string): Promise<void> {
    const { db, agentId, log } = this.#deps;
    try {
      const current = await getProject(db, projectId);
      if (!current || current.agent_id !== agentId) return;
      const truth = this.truth(projectId, current.state);
      if (truth !== current.state) {
        await this.record(projectId, current, truth);
        log(`agent: ${projectId} was recorded ${current.state}, is ${truth}: corrected`, { level: 'info', event: 'reconcile', project_id: projectId, from: current.state, to: truth });
      } else if (!current.state_kept) {
        await this.keep(projectId, current);
      }
    } catch (err) {
      log(`agent: reconciling ${projectId} at start failed: ${(err as Error).message}`);
    }
  }

  /** After a failed start: if `running` was already recorded, record the truth again. Never throws. */
  async undoEarlyRecord(projectId: string, recording: Promise<Recorded> | null): Promise<void> {
    if (!recording) return;
    const written = await recording.catch(() => null);
    if (!written || written.answer.state !== 'running') return;
    // Written unmarked, so nobody read it as true meanwhile; the truth now is written kept.
    try {
      await this.record(projectId, written.answer, this.truth(projectId, 'running'));
    } catch (err) {
      this.#deps.log(`agent: undoing the running state of ${projectId} failed: ${(err as Error).message}; GET corrects it`);
    }
  }

  /** Records `sleeping` for an engine the agent's shutdown stopped (`running` expected). */
  async recordStopped(projectId: string): Promise<void> {
    const { db, agentId, now } = this.#deps;
    await setProjectState(db, projectId, 'running', 'sleeping', nowIso(now()), { agentId, kept: true });
  }

  /** Announces a transition on the realtime `system` channel; a failure is logged, never thrown. */
  notify(projectId: string, event: LifecycleEvent, payload: Record<string, unknown>): void {
    try {
      this.#deps.emit(projectId, event, { project: projectId, ...payload });
    } catch (err) {
      this.#deps.log(`agent: lifecycle event ${event} for ${projectId} not emitted: ${(err as Error).message}`);
    }
  }

  /** The recorded project, which this agent must host. */
  async #hosted(projectId: string) {
    const current = await getProject(this.#deps.db, projectId);
    if (!current) throw errors.notFound(`project ${projectId} not found`);
    if (current.agent_id !== this.#deps.agentId) throw errors.orchestrator(`project ${projectId} is not hosted by this agent`);
    return current;
  }
}
