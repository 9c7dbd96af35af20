/**
 * The deletions of this agent's projects (docs/lifecycle.md "Deleting a project", "Crash safety:
 * agent start"): a deletion in its project's turn — the engine stopped, the commit point, the keys
 * forgotten, the rest removed (./delete.ts) — and the deletions a crash interrupted, finished in the
 * background from the agent's start. Past the commit point a deletion stands: what fails is retried
 * in the background, and at the next start.
 */
import type { Db } from '../../shared/db/client.ts';
import { deletionsOf, projectKeyIds, type ProjectDeletion } from '../../shared/db/project-delete.ts';
import { getProject } from '../../shared/db/projects.ts';
import { errors } from '../../shared/errors.ts';
import type { ProjectDeletedAnswer } from '../../shared/schemas/project-delete.ts';
import { finishDeletion, finishInBackground, markDeleting, type DeletionDeps, type DeletionRequest } from './delete.ts';
import type { Engines } from './engine.ts';
import type { Layout } from './layout.ts';
import type { ProjectQueue } from './queue.ts';
import type { RecordedStates } from './state.ts';

/** What the deletions need of the supervisor. */
export interface DeletionsDeps {
  settings: DeletionDeps['settings'];
  db: Db;
  agentId: string;
  layout: Layout;
  now: () => number;
  log: (line: string) => void;
  queue: ProjectQueue;
  engines: Engines;
  states: RecordedStates;
  /** What keeps the project from being deleted right now, or null (Tenants.busyWith). */
  busyWith(projectId: string): string | null;
}

/** The deletions of this agent's projects. */
export class ProjectDeletions {
  readonly #deps: DeletionsDeps;
  /** Deletions being finished (./delete.ts), one run per project at a time. */
  readonly #finishing = new Map<string, Promise<void>>();

  constructor(deps: DeletionsDeps) {
    this.#deps = deps;
  }

  /**
   * Deletes the project: 409 `conflict` at once while `busyWith` names something. In its turn: stops
   * its engine, commits the deletion (from then on the project is 404 everywhere, and every later
   * operation on it here is refused), hands its key ids to `forget` (the /v2 key cache and realtime
   * streams drop them), and removes the rest.
   */
  delete(projectId: string, request: DeletionRequest, forget: (keyIds: string[]) => void): Promise<ProjectDeletedAnswer> {
    const { queue, busyWith } = this.#deps;
    const busy = busyWith(projectId);
    if (busy) return Promise.reject(errors.conflict(`${busy}: retry once it has finished`));
    return queue.run(projectId, async () => {
      const busyNow = busyWith(projectId);
      if (busyNow) throw errors.conflict(`${busyNow}: retry once it has finished`);
      const { db, agentId, log, engines, states } = this.#deps;
      const live = engines.get(projectId);
      if (live) {
        await engines.stop(live, 'the project is being deleted');
        // Recorded at once: should the deletion stop short of its commit point, the state is true.
        await states.correct(projectId);
      }
      const project = await getProject(db, projectId);
      if (!project || project.agent_id !== agentId) throw errors.notFound(`project ${projectId} not found`);
      const state = states.truth(projectId, project.state);
      // Read before the commit point, so a read that fails leaves the project whole.
      const keyIds = await projectKeyIds(db, projectId);
      const deletion = await markDeleting(this.#parts(), project, request, state);
      queue.retire(projectId);
      // Again after it: a key issued meanwhile must go too (a failed read leaves its entry to refresh).
      const later = await projectKeyIds(db, projectId).catch(() => []);
      forget([...new Set([...keyIds, ...later])]);
      try {
        await this.#finish(deletion);
      } catch (err) {
        log(`agent: deleting ${projectId} failed after its commit point: ${(err as Error).message}; finished in the background`);
        finishInBackground(() => this.#finish(deletion), log, `deleting ${projectId}`, () => queue.closed, 1000);
      }
      return { state, deleted_at: deletion.deleted_at };
    });
  }

  /**
   * At start (docs/lifecycle.md "Crash safety: agent start"): the deletions a crash interrupted.
   * Their projects are refused from now on; what remains of them is removed in the background.
   */
  async resume(): Promise<void> {
    const { db, agentId, log, queue, engines } = this.#deps;
    let pending: ProjectDeletion[];
    try {
      pending = await deletionsOf(db, agentId);
    } catch (err) {
      log(`agent: reading the deletions to finish failed: ${(err as Error).message}; retried at the next start`);
      return;
    }
    for (const deletion of pending) {
      queue.retire(deletion.id);
      const live = engines.get(deletion.id);
      if (live) await engines.stop(live, 'the project is being deleted').catch(() => {});
      log(`agent: deleting ${deletion.id}: resumed at start`);
      finishInBackground(() => this.#finish(deletion), log, `deleting ${deletion.id}`, () => queue.closed);
    }
  }

  /** Finishes a committed deletion; a second call while one runs joins it. */
  #finish(deletion: ProjectDeletion): Promise<void> {
    let running = this.#finishing.get(deletion.id);
    if (!running) {
      running = finishDeletion(this.#parts(), deletion).finally(() => this.#finishing.delete(deletion.id));
      this.#finishing.set(deletion.id, running);
    }
    return running;
  }

  /** What a project's deletion needs. */
  #parts(): DeletionDeps {
    const { db, settings, layout, now, log } = this.#deps;
    return { db, settings, layout, now, log };
  }
}
