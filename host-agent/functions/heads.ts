/**
 * What the agent remembers of its projects' functions (docs/functions.md): each function's current
 * head, read once and again after REFRESH_MS in any case. The agent is the one writer of its
 * projects' function items, so what it remembers is what DynamoDB holds. A project deleted while the
 * agent runs is gone: none of its functions is found again.
 */
import type { Db } from '../../shared/db/client.ts';
import { getFunction, type FunctionRecord } from '../../shared/db/functions.ts';
import { errors } from '../../shared/errors.ts';

/** Age after which a function's remembered head is read again. */
const REFRESH_MS = 60_000;

interface Remembered {
  head: FunctionRecord;
  readAt: number;
}

/** The current heads of the agent's functions, keyed `<project>/<name>`. */
export class FunctionHeads {
  readonly #db: Db;
  readonly #now: () => number;
  readonly #heads = new Map<string, Remembered>();
  /** Projects deleted while this agent runs: nothing of theirs is served any more. */
  readonly #gone = new Set<string>();

  constructor(db: Db, now: () => number) {
    this.#db = db;
    this.#now = now;
  }

  /** Whether the project was deleted while this agent runs. */
  gone(projectId: string): boolean {
    return this.#gone.has(projectId);
  }

  /** The function's current head, or 404. */
  async current(projectId: string, name: string): Promise<FunctionRecord> {
    const fn = `${projectId}/${name}`;
    const remembered = this.#heads.get(fn);
    if (!this.#gone.has(projectId) && remembered && this.#now() - remembered.readAt <= REFRESH_MS) return remembered.head;
    const head = await this.read(projectId, name);
    if (!head) {
      this.#heads.delete(fn);
      throw errors.notFound(`function ${name} not found`);
    }
    // A deploy that finished while this read was in flight wrote a newer head: keep the newer.
    const latest = this.#heads.get(fn);
    if (!latest || latest.head.generation !== head.generation || latest.head.version <= head.version) {
      this.#heads.set(fn, { head, readAt: this.#now() });
    }
    return this.#heads.get(fn)!.head;
  }

  /** The function's head as DynamoDB holds it now (null for none, or a project gone). */
  read(projectId: string, name: string): Promise<FunctionRecord | null> {
    return this.#gone.has(projectId) ? Promise.resolve(null) : getFunction(this.#db, projectId, name);
  }

  /** A deploy wrote `head`. */
  remember(head: FunctionRecord): void {
    this.#heads.set(`${head.project}/${head.name}`, { head, readAt: this.#now() });
  }

  /** The function was deleted. */
  forget(projectId: string, name: string): void {
    this.#heads.delete(`${projectId}/${name}`);
  }

  /**
   * The project was deleted (`deleted`): none of its functions is found again. Or it moved away or
   * here (docs/durability.md): what is remembered of it is dropped and read again when needed.
   */
  forgetProject(projectId: string, deleted = true): void {
    if (deleted) this.#gone.add(projectId);
    else this.#gone.delete(projectId);
    for (const fn of [...this.#heads.keys()]) if (fn.startsWith(`${projectId}/`)) this.#heads.delete(fn);
  }
}
