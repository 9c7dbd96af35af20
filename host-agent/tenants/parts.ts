/** What a move works with in the project's turn (`Tenants.exclusive`; host-agent/moves/, docs/durability.md). */
import type { Engines } from './engine.ts';
import type { ProjectQueue } from './queue.ts';
import type { RestoreDeps } from './restore.ts';
import type { RecordedStates } from './state.ts';

/** The supervisor's parts: what snapshot and restore need, plus the engines, the recorded states and the queue. */
export interface TenantParts extends RestoreDeps {
  log: (line: string) => void;
  engines: Engines;
  states: RecordedStates;
  queue: ProjectQueue;
}
