/**
 * Routes: create, read, list, rename and delete projects (contract "POST /v0/projects", "GET
 * /v0/projects/{id}"; rules in handlers/domain/projects.ts, the deletion in
 * handlers/domain/project-delete.ts and docs/lifecycle.md "Deleting a project").
 */
import { pageQuerySchema } from '../../shared/schemas/pagination.ts';
import { createProjectRequestSchema, renameProjectRequestSchema } from '../../shared/schemas/projects.ts';
import { requireProjectForAgent, requireSession } from '../auth.ts';
import type { Routes } from '../context.ts';
import { deleteProject } from '../domain/project-delete.ts';
import { createProject, listOwnedProjects, readProject, renameProject } from '../domain/projects.ts';
import { json, noBody, noInput, noQuery, queryOf, readJson } from '../http.ts';

/** Registers the project routes. */
export function register(router: Routes): void {
  router.post('/v0/projects', async (request, ctx) => {
    const owner = await requireSession(request, ctx);
    const body = await readJson(request, createProjectRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    return json(await createProject(ctx.deps, { owner, name: body.name }), 201);
  });

  router.get('/v0/projects', async (request, ctx) => {
    const owner = await requireSession(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await listOwnedProjects(ctx.deps, owner, query);
    return json({ projects: page.items, next_cursor: page.next_cursor });
  });

  router.get('/v0/projects/:id', async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    await noInput(request);
    return json(await readProject(ctx.deps, { ...owned, requestId: ctx.requestId }));
  });

  router.patch('/v0/projects/:id', async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    noQuery(new URL(request.url));
    const body = await readJson(request, renameProjectRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    return json(await renameProject(ctx.deps, { ...owned, requestId: ctx.requestId, name: body.name }));
  });

  router.delete('/v0/projects/:id', async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    await noInput(request);
    return json(await deleteProject(ctx.deps, { ...owned, requestId: ctx.requestId }));
  });
}
