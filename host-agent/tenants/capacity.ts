/**
 * The agent's engine capacity (docs/lifecycle.md "Capacity"): `SVCD_AGENT_CAPACITY` bounds the engines
 * that run at once, counting those still starting, so concurrent wakeups cannot overshoot it. Projects
 * placed on the agent are not counted: a sleeping or never-started tenant costs no engine.
 */
import { errors } from '../../shared/errors.ts';

/** Engine slots: the running engines (counted by the supervisor) plus the starts in flight. */
export class EngineSlots {
  readonly #limit: number;
  readonly #running: () => number;
  readonly #starting = new Set<string>();

  constructor(limit: number, running: () => number) {
    this.#limit = limit;
    this.#running = running;
  }

  /**
   * Takes a slot for starting `projectId`'s engine, or throws 503 `orchestrator_unavailable` naming
   * the limit. Answers the release, called once the start is over (the engine then counts as running,
   * or there is none).
   */
  claim(projectId: string): () => void {
    if (this.#running() + this.#starting.size >= this.#limit) {
      throw errors.orchestrator(`this host runs at most ${this.#limit} engines (SVCD_AGENT_CAPACITY); sleep a project first`);
    }
    this.#starting.add(projectId);
    return () => this.#starting.delete(projectId);
  }
}
