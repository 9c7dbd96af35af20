/**
 * Automatic sleep (docs/lifecycle.md "Automatic sleep and backups"): a running tenant whose project
 * sets `auto_sleep_after_s` is put to sleep once that long has passed without `/v2` traffic to its
 * engine, through the same sleep as the API's (the project's queue, the recorded state, the
 * `project.sleeping` event, then the automatic backup). Nothing here ever wakes a tenant.
 *
 * What counts as traffic is kept in memory (`Activity`): the `/v2` listener marks each request to an
 * engine of this agent as it begins and as it ends, and a request in flight keeps its engine awake
 * however long it takes. An engine counts as active when it is first seen running, so a wakeup
 * starts a new idle time.
 */
import type { Db } from '../../shared/db/client.ts';
import { getProject } from '../../shared/db/projects.ts';
import { ServiceError } from '../../shared/errors.ts';
import type { Log } from '../../shared/log.ts';
import type { RecordedState, TenantStateAnswer } from '../../shared/schemas/lifecycle.ts';

/** When each project's engine last had `/v2` traffic, and how many requests to it are in flight (memory only). */
export class Activity {
  readonly #last = new Map<string, number>();
  readonly #inFlight = new Map<string, number>();
  readonly #now: () => number;

  constructor(now: () => number) {
    this.#now = now;
  }

  /** A `/v2` request to the project's engine begins; answers the call that marks its end. Two map writes. */
  touch(projectId: string): () => void {
    this.#last.set(projectId, this.#now());
    this.#inFlight.set(projectId, (this.#inFlight.get(projectId) ?? 0) + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.#last.set(projectId, this.#now());
      const left = (this.#inFlight.get(projectId) ?? 1) - 1;
      if (left > 0) this.#inFlight.set(projectId, left);
      else this.#inFlight.delete(projectId);
    };
  }

  /** The project's engine (re)started: its idle time begins now. */
  begin(projectId: string): void {
    this.#last.set(projectId, this.#now());
  }

  /** Milliseconds since the project's last traffic; 0 while a request is in flight or before any was counted. */
  idleMs(projectId: string): number {
    if (this.#inFlight.has(projectId)) return 0;
    const last = this.#last.get(projectId);
    return last === undefined ? 0 : Math.max(0, this.#now() - last);
  }

  /** Drops what is known of a project no longer running (requests in flight still end normally). */
  forget(projectId: string): void {
    if (!this.#inFlight.has(projectId)) this.#last.delete(projectId);
  }
}

/** What the idle sleeper needs of the supervisor (host-agent/tenants/tenants.ts). */
export interface IdleTenants {
  readonly activity: Activity;
  runningProjects(): string[];
  onExit(listener: (projectId: string) => void): () => void;
  sleepIdle(projectId: string, recorded: RecordedState, stillIdle: () => boolean, why: string): Promise<TenantStateAnswer | null>;
}

/** What the idle sleeper needs. */
export interface IdleDeps {
  db: Db;
  agentId: string;
  tenants: IdleTenants;
  /** `SVCD_AUTO_SLEEP_MIN_S`: no project sleeps sooner, so a tenant idle for less is not even looked at. */
  minSeconds: number;
  log: Log;
  now: () => number;
  /** How often running tenants are looked at (default 1 s). */
  tickMs?: number;
}

/** A project's setting as last read, and when. */
interface Known {
  afterS: number | null;
  readAt: number;
}

/** Sleeps running tenants idle past their project's `auto_sleep_after_s`. */
export class IdleSleeper {
  readonly #deps: IdleDeps;
  /** Running projects seen at the last tick: one not among them has just (re)started. */
  readonly #seen = new Set<string>();
  readonly #known = new Map<string, Known>();
  /** Projects being looked at or put to sleep now. */
  readonly #busy = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #unsubscribe: () => void = () => {};

  constructor(deps: IdleDeps) {
    this.#deps = deps;
  }

  /** How long a setting read from the project is trusted: a changed one is seen within this (at most 60 s). */
  get #settingTtlMs(): number {
    return Math.min(60_000, Math.max(1000, this.#deps.minSeconds * 1000));
  }

  /** Starts looking at running tenants every `tickMs`. */
  start(): void {
    const { tenants, tickMs = 1000 } = this.#deps;
    this.#unsubscribe = tenants.onExit((projectId) => {
      this.#seen.delete(projectId);
      tenants.activity.forget(projectId);
    });
    this.#timer = setInterval(() => this.tick(), tickMs);
    this.#timer.unref();
  }

  /** Stops looking; a sleep already begun finishes in its turn. */
  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#unsubscribe();
  }

  /** One look at every running tenant: those idle for at least `SVCD_AUTO_SLEEP_MIN_S` have their setting judged. */
  tick(): void {
    const { tenants, minSeconds } = this.#deps;
    const running = new Set(tenants.runningProjects());
    for (const projectId of this.#seen) if (!running.has(projectId)) this.#seen.delete(projectId);
    for (const projectId of this.#known.keys()) if (!running.has(projectId)) this.#known.delete(projectId);
    for (const projectId of running) {
      if (!this.#seen.has(projectId)) {
        this.#seen.add(projectId);
        tenants.activity.begin(projectId);
        continue;
      }
      if (this.#busy.has(projectId) || tenants.activity.idleMs(projectId) < minSeconds * 1000) continue;
      this.#busy.add(projectId);
      void this.#consider(projectId).finally(() => this.#busy.delete(projectId));
    }
  }

  /** Sleeps the tenant when its setting says it has been idle long enough; never throws. */
  async #consider(projectId: string): Promise<void> {
    const { db, agentId, tenants, log, now } = this.#deps;
    try {
      const known = this.#known.get(projectId);
      const fresh = known !== undefined && now() - known.readAt < this.#settingTtlMs;
      if (fresh && (known.afterS === null || tenants.activity.idleMs(projectId) < known.afterS * 1000)) return;
      // Judged on a fresh read, so a setting turned off is never acted on late.
      const project = await getProject(db, projectId);
      const afterS = project && project.agent_id === agentId ? (project.auto_sleep_after_s ?? null) : null;
      this.#known.set(projectId, { afterS, readAt: now() });
      if (!project || afterS === null) return;
      const limitMs = afterS * 1000;
      const idleMs = tenants.activity.idleMs(projectId);
      if (idleMs < limitMs) return;
      // Judged again in the project's turn, just before the engine is stopped: a request that came
      // meanwhile keeps it running.
      const slept = await tenants.sleepIdle(projectId, project, () => tenants.activity.idleMs(projectId) >= limitMs, `no /v2 traffic for ${afterS} s (auto_sleep_after_s)`);
      if (slept) {
        log(`agent: ${projectId} slept after ${Math.round(idleMs / 1000)} s without /v2 traffic (auto_sleep_after_s ${afterS})`, {
          level: 'info',
          event: 'auto_sleep',
          project_id: projectId,
          idle_s: Math.round(idleMs / 1000),
        });
      }
    } catch (err) {
      // A project deleted meanwhile, or the agent stopping: nothing to do. Anything else is tried at a later tick.
      if (err instanceof ServiceError && (err.code === 'not_found' || err.code === 'orchestrator_unavailable')) return;
      log(`agent: the automatic sleep of ${projectId} failed: ${(err as Error).message}; tried again later`);
    }
  }
}
