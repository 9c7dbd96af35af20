/**
 * Routes: create, read, list, change (rename, automatic sleep and backups) and delete projects (contract "POST /v0/projects", "GET
 * /v0/projects/{id}"; declared in shared/api/projects.ts; rules in handlers/domain/projects.ts, the
 * deletion in handlers/domain/project-delete.ts and docs/lifecycle.md "Deleting a project").
 */
import { projects } from '../../shared/api/index.ts';
import { requireProjectForAgent, requireSession } from '../auth.ts';
import { forkProject } from '../domain/moves.ts';
import { deleteProject } from '../domain/project-delete.ts';
import { createProject, listOwnedProjects, readProject, updateProject } from '../domain/projects.ts';
import { json } from '../http.ts';
import { implement } from '../implement.ts';

export const implementations = [
  implement(projects.create, requireSession, async ({ caller: owner, body }, ctx) =>
    json(
      body.from_snapshot === undefined
        ? await createProject(ctx.deps, { owner, name: body.name })
        : await forkProject(ctx.deps, { owner, name: body.name, fromSnapshot: body.from_snapshot, fromProject: body.from_project, requestId: ctx.requestId }),
      201,
    ),
  ),

  implement(projects.list, requireSession, async ({ caller: owner, query }, ctx) => {
    const page = await listOwnedProjects(ctx.deps, owner, query);
    return json({ projects: page.items, next_cursor: page.next_cursor });
  }),

  implement(projects.read, requireProjectForAgent, async ({ caller }, ctx) => json(await readProject(ctx.deps, { ...caller, requestId: ctx.requestId }))),

  implement(projects.rename, requireProjectForAgent, async ({ caller, body }, ctx) =>
    json(await updateProject(ctx.deps, { ...caller, requestId: ctx.requestId, changes: body })),
  ),

  implement(projects.remove, requireProjectForAgent, async ({ caller }, ctx) => json(await deleteProject(ctx.deps, { ...caller, requestId: ctx.requestId }))),
];
