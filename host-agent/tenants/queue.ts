/**
 * The per-project queue (docs/lifecycle.md "The host agent's side"): lifecycle operations on one
 * project (wakeup, sleep, head, snapshot, restore, state corrections) run one at a time; different
 * projects never wait for each other.
 */
import { errors } from '../../shared/errors.ts';

/** The refusal of an operation asked for while the agent shuts down. */
export function shuttingDown(): Error {
  return errors.orchestrator('the host agent is shutting down');
}

/** One queue per project, and the agent's shutdown flag that closes them all. */
export class ProjectQueue {
  readonly #tails = new Map<string, Promise<void>>();
  #closed = false;

  /** Whether the agent is shutting down: new operations are refused. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Runs `fn` after every earlier operation on the same project; other projects run concurrently. */
  run<T>(projectId: string, fn: () => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(shuttingDown());
    const previous = this.#tails.get(projectId) ?? Promise.resolve();
    // Operations queued before shutdown began still run: the agent's stop waits for them (bounded).
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

  /** Refuses new operations from now on; answers when those already queued have settled. */
  close(): Promise<void> {
    this.#closed = true;
    return Promise.allSettled([...this.#tails.values()]).then(() => {});
  }
}
