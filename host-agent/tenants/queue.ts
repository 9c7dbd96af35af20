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

/** The refusal of an operation on a project deleted meanwhile (its queue retired). */
function deleted(projectId: string): Error {
  return errors.notFound(`project ${projectId} not found`);
}

/** One queue per project, and the agent's shutdown flag that closes them all. */
export class ProjectQueue {
  readonly #tails = new Map<string, Promise<void>>();
  /** Retired projects and the refusal their later operations get (deleted: 404; moved away: 503). */
  readonly #retired = new Map<string, () => Error>();
  #closed = false;

  /** Whether the agent is shutting down: new operations are refused. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Runs `fn` after every earlier operation on the same project; other projects run concurrently. */
  run<T>(projectId: string, fn: () => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(shuttingDown());
    const refusal = this.#retired.get(projectId);
    if (refusal) return Promise.reject(refusal());
    const previous = this.#tails.get(projectId) ?? Promise.resolve();
    // Operations queued before shutdown began still run: the agent's stop waits for them (bounded).
    // Those queued behind a deletion find the project gone when their turn comes.
    const result = previous.then(() => {
      const refused = this.#retired.get(projectId);
      if (refused) throw refused();
      return fn();
    });
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
   * Refuses every later operation on the project with 404, those already queued included: it has
   * been deleted (docs/lifecycle.md "Deleting a project"). Called by the deletion, from its turn.
   */
  retire(projectId: string, refusal: () => Error = () => deleted(projectId)): void {
    this.#retired.set(projectId, refusal);
  }

  /** Takes operations on the project again (a project that moved away and came back, docs/durability.md). */
  reinstate(projectId: string): void {
    this.#retired.delete(projectId);
  }

  /** Refuses new operations from now on; answers when those already queued have settled. */
  close(): Promise<void> {
    this.#closed = true;
    return Promise.allSettled([...this.#tails.values()]).then(() => {});
  }
}
