/**
 * Starting a project's engine (docs/lifecycle.md "Starting an engine (wakeup)"): the cold half of a
 * wakeup, once the project's queue and an engine slot are held (./tenants.ts `wakeup`).
 */
import { existsSync, mkdirSync } from 'node:fs';
import type { RecordedState, TenantStateAnswer } from '../../shared/schemas/lifecycle.ts';
import { initCommand } from '../engine-commands.ts';
import type { Engines, Live } from './engine.ts';
import { initDataDir } from './init.ts';
import type { Layout } from './layout.ts';
import type { EnginePin } from './pin.ts';
import type { Recorded, RecordedStates } from './state.ts';

/** What a cold start needs of the supervisor. */
export interface ColdStartDeps {
  layout: Layout;
  now: () => number;
  pin: EnginePin;
  engines: Engines;
  states: RecordedStates;
}

/**
 * The cold half of a wakeup (the caller holds the project's queue and an engine slot): the data
 * directory initialized on a first start (./init.ts), the engine started (./engine.ts), and its
 * state recorded `running` while it boots.
 */
export async function coldStart(deps: ColdStartDeps, projectId: string, recorded: RecordedState): Promise<TenantStateAnswer> {
  const { engines, states, layout } = deps;
  await deps.pin.ensure();
  mkdirSync(layout.tenantDir(projectId), { recursive: true });
  if (!existsSync(layout.dataDir(projectId))) {
    await initDataDir(
      layout,
      projectId,
      deps.now(),
      (dir) => engines.privateDir(dir),
      (dir) => engines.run(projectId, initCommand, { dataDir: dir }, 'wakeup', engines.startTimeoutMs),
    );
  }
  // The state is written while the engine boots, not after it: the write leaves the critical path.
  // Until the engine is ready nobody can see the early `running` through the API: it is written
  // unmarked, so GET asks this agent, which reconciles under this project's queue, held by this
  // wakeup (docs/lifecycle.md "Reconciliation"). A failed start writes the truth back, and a crash
  // in between is corrected by the next start's reconciliation.
  let recording: Promise<Recorded> | null = null;
  let live: Live;
  try {
    live = await engines.start(projectId, () => {
      recording = states.record(projectId, recorded, 'running', { early: true });
      recording.catch(() => {});
    });
  } catch (err) {
    await states.undoEarlyRecord(projectId, recording);
    throw err;
  }
  let recordedNow: Recorded;
  try {
    recordedNow = await (recording ?? states.record(projectId, recorded, 'running'));
  } catch (err) {
    // An error answer must mean "not running": do not leave an engine behind the recorded state.
    await engines.stop(live, 'its running state could not be recorded').catch(() => {});
    throw err;
  }
  states.notify(projectId, 'project.running', { state: 'running' });
  // Marked kept now that it holds, beside the answer rather than before it: a GET meanwhile asks
  // this agent, which finds it true.
  if (recording) void states.keep(projectId, recordedNow.answer);
  return recordedNow.answer;
}
