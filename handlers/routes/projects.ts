/** Routes: create, read and list projects (contract "POST /v0/projects", "GET /v0/projects/{id}"). */
import { choosePlacement, listAgents } from '../shared/db/agents.ts';
import { createProject, listProjects, projectView } from '../shared/db/projects.ts';
import { errors } from '../shared/errors.ts';
import { newId } from '../shared/ids.ts';
import { createProjectRequestSchema, pageQuerySchema } from '../shared/schemas.ts';
import { nowIso } from '../shared/time.ts';
import { requireOwnedProject, requireSession } from './auth.ts';
import type { Routes } from './context.ts';
import { reconciledProject } from './lifecycle.ts';
import { json, listPage, noBody, noInput, queryOf, readJson } from './http.ts';

/** Registers the project routes. */
export function register(router: Routes): void {
  router.post('/v0/projects', async (request, ctx) => {
    const { settings, db } = ctx.deps;
    const owner = await requireSession(request, ctx);
    const body = await readJson(request, createProjectRequestSchema, settings.SVCD_JSON_MAX_BYTES);
    const agent = choosePlacement(await listAgents(db), settings.SVCD_AGENT_STALE_MS, ctx.deps.now());
    if (!agent) throw errors.orchestrator('no live host agent can run tenants');
    const at = nowIso(ctx.deps.now());
    const record = {
      id: newId('prj'),
      name: body.name,
      state: 'stopped' as const,
      created_at: at,
      updated_at: at,
      owner,
      agent_id: agent.agent_id,
    };
    await createProject(db, record);
    return json(projectView(record), 201);
  });

  router.get('/v0/projects', async (request, ctx) => {
    const { db } = ctx.deps;
    const owner = await requireSession(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await listPage(ctx, ['projects', owner], query, (limit, after) => listProjects(db, owner, limit, after));
    return json({ projects: page.items.map(projectView), next_cursor: page.next_cursor });
  });

  router.get('/v0/projects/:id', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    await noInput(request);
    // The recorded state is reconciled with the live process by the project's agent (contract "States and transitions").
    return json(await reconciledProject(ctx, project));
  });
}
