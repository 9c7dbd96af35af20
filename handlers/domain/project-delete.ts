/**
 * Deleting a project (docs/lifecycle.md "Deleting a project"): the project's host agent does it all
 * — refuses while a snapshot or restore is in progress (409 `conflict`), stops the engine, commits
 * the deletion (from then on the project is 404 everywhere and its keys are 401 on `/v2`), and
 * removes its keys, buckets, objects and their blobs, snapshots, secrets, functions and directories
 * before it answers. The handler checked ownership and renders the answer.
 */
import { projectView } from '../../shared/db/projects.ts';
import type { ProjectDeletedAnswer } from '../../shared/schemas/project-delete.ts';
import type { Project } from '../../shared/schemas/projects.ts';
import type { Deps } from '../context.ts';
import { callAgent, deletionOf, type LifecycleCall } from './lifecycle.ts';

/** Deletes the caller's project; answers it as it was last, its engine stopped. */
export async function deleteProject(deps: Deps, call: LifecycleCall): Promise<Project> {
  const answer = await callAgent<ProjectDeletedAnswer>(deps, call, 'delete', { ...deletionOf(call) });
  deps.placement.forgetProject(call.project.id);
  return projectView({ ...call.project, state: answer.state, updated_at: answer.deleted_at });
}
