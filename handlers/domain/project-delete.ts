/**
 * Deleting a project (docs/lifecycle.md "Deleting a project"): the project's host agent does it all
 * — refuses while a snapshot or restore is in progress (409 `conflict`), stops the engine, commits
 * the deletion (from then on the project is 404 everywhere and its keys are 401 on `/v2`), and
 * removes its keys, buckets, objects and their blobs, snapshots, secrets, functions and directories
 * before it answers. The handler checked ownership and renders the answer.
 *
 * A 503 answers that nothing was deleted. An agent call can fail after the agent has committed the
 * deletion (its answer lost on the way back), so a failed call is not answered as it failed: it is
 * asked once more — the agent runs a project's operations one at a time, so that call waits for the
 * first and then finds the deletion done, or does it — and the deletion record, read consistently,
 * says which answer is true.
 */
import { getProjectDeletion, type ProjectDeletion } from '../../shared/db/project-delete.ts';
import { projectView } from '../../shared/db/projects.ts';
import { ServiceError } from '../../shared/errors.ts';
import type { ProjectDeletedAnswer } from '../../shared/schemas/project-delete.ts';
import type { Project } from '../../shared/schemas/projects.ts';
import type { Deps } from '../context.ts';
import { callAgent, deletionOf, type LifecycleCall } from './lifecycle.ts';

/** Deletes the caller's project; answers it as it was last, its engine stopped. */
export async function deleteProject(deps: Deps, call: LifecycleCall): Promise<Project> {
  const ask = () => callAgent<ProjectDeletedAnswer>(deps, call, 'delete', { ...deletionOf(call) });
  let answer: ProjectDeletedAnswer;
  try {
    answer = await ask();
  } catch (err) {
    if (!unanswered(err)) throw err;
    answer = await ask().catch(async (again: unknown) => {
      const deletion = await getProjectDeletion(deps.db, call.project.id);
      if (!deletion || deletion.owner !== call.project.owner) throw again;
      return answerOf(deletion, call);
    });
  }
  deps.placement.forgetProject(call.project.id);
  return projectView({ ...call.project, state: answer.state, updated_at: answer.deleted_at });
}

/** A call whose outcome the handler does not know: the agent unreachable, or its answer lost. */
function unanswered(err: unknown): boolean {
  return err instanceof ServiceError && err.code === 'orchestrator_unavailable';
}

/**
 * The answer of a committed deletion, from its record: the state it recorded (a record written
 * without one: the engine stopped, so `sleeping` unless the project never ran).
 */
function answerOf(deletion: ProjectDeletion, call: LifecycleCall): ProjectDeletedAnswer {
  const state = deletion.project_state ?? (call.project.state === 'stopped' ? 'stopped' : 'sleeping');
  return { state, deleted_at: deletion.deleted_at };
}
