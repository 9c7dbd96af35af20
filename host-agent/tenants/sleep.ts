/**
 * Sleep (docs/lifecycle.md "Stopping (sleep)") and what follows it in the same turn of the project's
 * queue: the automatic backup (docs/lifecycle.md "Automatic sleep and backups", ./auto-backup.ts).
 * The sleep is answered as soon as its state is recorded; the step after it keeps the turn, so a
 * wakeup asked for meanwhile waits for it rather than finding the tenant running under a backup.
 * Also the snapshot as taken in a turn, held while it is taken (./holds.ts), which both the
 * snapshot route and the automatic backup use, and the agent's shutdown, which stops every engine.
 */
import type { Snapshot } from '../../shared/db/snapshots.ts';
import type { RecordedState, TenantStateAnswer } from '../../shared/schemas/lifecycle.ts';
import type { Engines } from './engine.ts';
import type { SnapshotHolds } from './holds.ts';
import { within } from './processes.ts';
import type { ProjectQueue } from './queue.ts';
import { takeSnapshot, type SnapshotDeps, type SnapshotOptions } from './snapshot.ts';
import type { RecordedStates } from './state.ts';

/** What an after-sleep step may do in the project's turn. */
export interface SleepTurn {
  /** The supervisor's parts, for the engine's offline commands (the tenant is asleep, the turn held). */
  parts: SnapshotDeps;
  /** Takes a snapshot in this turn. */
  snapshot(label: string, options: SnapshotOptions): Promise<Snapshot>;
}

/** Runs in the project's turn after each sleep that stopped an engine or changed the state, once the sleep is answered. Must not throw. */
export type AfterSleep = (projectId: string, turn: SleepTurn) => Promise<void>;

/** What a sleep and a held snapshot need of the supervisor. */
export interface SleepParts extends SnapshotDeps {
  log: (line: string) => void;
  engines: Engines;
  queue: ProjectQueue;
  states: RecordedStates;
  holds: SnapshotHolds;
  afterSleep?: AfterSleep | undefined;
}

/** How a sleep was asked for. */
export interface SleepOptions {
  /** The reason written to the tenant's log. */
  why: string;
  /** Judged in the turn, just before the engine is stopped: when it does not hold, nothing is done and null answered (./idle.ts). */
  stillIdle?: () => boolean;
}

/** Sleep: any state → `sleeping`; the engine is stopped gracefully; the data directory stays. Idempotent. */
export function sleepTenant(parts: SleepParts, projectId: string, recorded: RecordedState, options: SleepOptions): Promise<TenantStateAnswer | null> {
  return new Promise((resolve, reject) => {
    parts.queue
      .run(projectId, async () => {
        const live = parts.engines.get(projectId);
        if (options.stillIdle && !(live && !live.stopping && options.stillIdle())) return resolve(null);
        if (live) await parts.engines.stop(live, options.why);
        const { answer, changed } = await parts.states.record(projectId, recorded, 'sleeping');
        if (live || changed) parts.states.notify(projectId, 'project.sleeping', { state: 'sleeping' });
        resolve(answer);
        if ((live || changed) && parts.afterSleep) {
          await parts.afterSleep(projectId, { parts, snapshot: (label, snapshotOptions) => heldSnapshot(parts, projectId, label, snapshotOptions) });
        }
      })
      .catch(reject);
  });
}

/**
 * At the agent's shutdown, once the queues are closed: every engine stopped (SIGTERM, timer,
 * SIGKILL), all at once, and recorded `sleeping`. No automatic backup follows: the next sleep after
 * the agent's start takes it.
 */
export async function stopEvery(parts: Pick<SleepParts, 'engines' | 'states' | 'log'>): Promise<void> {
  const { engines, states, log } = parts;
  await Promise.all(
    engines.all().map(async (live) => {
      try {
        await engines.stop(live, 'the host agent is stopping');
      } catch (err) {
        log(`agent: stopping the engine of ${live.projectId} failed: ${(err as Error).message}`);
        return;
      }
      if (!(await within(states.recordStopped(live.projectId), 3000))) {
        log(`agent: recording ${live.projectId} as sleeping timed out; the next start corrects it`);
      }
    }),
  );
}

/** A snapshot taken in the project's turn (the caller holds it), its new id held until it is recorded. */
export async function heldSnapshot(parts: SleepParts, projectId: string, label: string | null, options: SnapshotOptions = {}): Promise<Snapshot> {
  let release = () => {};
  try {
    const snapshot = await takeSnapshot(
      parts,
      projectId,
      label,
      (id) => {
        release = parts.holds.hold(projectId, id);
      },
      options,
    );
    parts.states.notify(projectId, 'snapshot.created', { snapshot_id: snapshot.id, label, created_at: snapshot.created_at });
    return snapshot;
  } finally {
    release();
  }
}
