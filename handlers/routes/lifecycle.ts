/**
 * Routes: the tenant lifecycle (contract "States and transitions"; POST wakeup, POST sleep, GET head,
 * POST snapshots, POST restore) plus the snapshot reads users expect (`GET …/snapshots`, newest first
 * and paginated; `GET …/snapshots/{snapshot_id}`). The handler authenticates and checks ownership; the
 * project's host agent does the work and records the state (docs/lifecycle.md). Wakeup, sleep and
 * head take no body and no query: either is 400 (docs/api.md "Decisions").
 */
import { getSnapshot, listSnapshots } from '../shared/db/snapshots.ts';
import { getOwnedProject, projectView, type ProjectRecord } from '../shared/db/projects.ts';
import { errors } from '../shared/errors.ts';
import { createSnapshotRequestSchema, restoreRequestSchema, snapshotIdSchema, type RecordedState, type TenantStateAnswer } from '../shared/lifecycle.ts';
import type { Project } from '../shared/schemas.ts';
import { pageQuerySchema, projectIdSchema } from '../shared/schemas.ts';
import { requireOwnedProject, requireSession } from './auth.ts';
import type { Ctx, Routes } from './context.ts';
import { json, listPage, noBody, noInput, pathParam, queryOf, readJson } from './http.ts';
import { agentFor, prefetchAgent, type AgentPrefetch } from './domain/placement.ts';

function recordedOf(project: ProjectRecord): RecordedState {
  return { state: project.state, updated_at: project.updated_at };
}

/**
 * `requireOwnedProject` for routes that go on to call the project's agent: once the session is
 * verified, the agent record of a remembered placement is read alongside the project (placement.ts),
 * not after it. Same checks in the same order; the prefetch is ignored unless the project is owned.
 */
async function ownedProjectForAgent(
  request: Request & { params: Record<string, string> },
  ctx: Ctx,
): Promise<{ project: ProjectRecord; prefetched: AgentPrefetch | undefined }> {
  const accountId = await requireSession(request, ctx);
  const projectId = pathParam(request.params.id, 'id', projectIdSchema);
  const prefetched = prefetchAgent(ctx.deps, projectId);
  const project = await getOwnedProject(ctx.deps.db, projectId, accountId);
  return { project, prefetched };
}

/** Calls the project's agent on one of its internal lifecycle routes. */
async function callAgent<T>(ctx: Ctx, project: ProjectRecord, op: string, body: Record<string, unknown> = {}, prefetched?: AgentPrefetch): Promise<T> {
  const agent = await agentFor(ctx.deps, project, prefetched);
  return ctx.deps.agents.json<T>(agent, 'POST', `/internal/v1/projects/${project.id}/${op}`, {
    body: { recorded: recordedOf(project), ...body },
    requestId: ctx.requestId,
  });
}

/** The project with its recorded state reconciled against the live process (contract "GET project"). */
export async function reconciledProject(ctx: Ctx, project: ProjectRecord): Promise<Project> {
  const state = await callAgent<TenantStateAnswer>(ctx, project, 'reconcile');
  return projectView({ ...project, state: state.state, updated_at: state.updated_at });
}

/** Registers the lifecycle routes. */
export function register(router: Routes): void {
  router.post('/v0/projects/:id/wakeup', async (request, ctx) => {
    const { project, prefetched } = await ownedProjectForAgent(request, ctx);
    await noInput(request);
    const state = await callAgent<TenantStateAnswer>(ctx, project, 'wakeup', {}, prefetched);
    return json(projectView({ ...project, state: state.state, updated_at: state.updated_at }));
  });

  router.post('/v0/projects/:id/sleep', async (request, ctx) => {
    const { project, prefetched } = await ownedProjectForAgent(request, ctx);
    await noInput(request);
    const state = await callAgent<TenantStateAnswer>(ctx, project, 'sleep', {}, prefetched);
    return json(projectView({ ...project, state: state.state, updated_at: state.updated_at }));
  });

  router.get('/v0/projects/:id/head', async (request, ctx) => {
    const { project, prefetched } = await ownedProjectForAgent(request, ctx);
    await noInput(request);
    return json(await callAgent<Record<string, unknown>>(ctx, project, 'head', {}, prefetched));
  });

  router.post('/v0/projects/:id/snapshots', async (request, ctx) => {
    const { project, prefetched } = await ownedProjectForAgent(request, ctx);
    const body = await readJson(request, createSnapshotRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    const snapshot = await callAgent<Record<string, unknown>>(ctx, project, 'snapshots', { label: body.label ?? null }, prefetched);
    return json(snapshot, 201);
  });

  router.get('/v0/projects/:id/snapshots', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await listPage(ctx, ['snapshots', project.id], query, (limit, after) => listSnapshots(ctx.deps.db, project.id, limit, after));
    return json({ snapshots: page.items, next_cursor: page.next_cursor });
  });

  router.get('/v0/projects/:id/snapshots/:snapshot_id', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const snapshotId = pathParam(request.params.snapshot_id, 'snapshot_id', snapshotIdSchema);
    await noInput(request);
    const snapshot = await getSnapshot(ctx.deps.db, project.id, snapshotId);
    if (!snapshot) throw errors.notFound(`snapshot ${snapshotId} not found`);
    return json(snapshot);
  });

  router.post('/v0/projects/:id/restore', async (request, ctx) => {
    const { project, prefetched } = await ownedProjectForAgent(request, ctx);
    const body = await readJson(request, restoreRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    return json(await callAgent<Record<string, unknown>>(ctx, project, 'restore', { snapshot_id: body.snapshot_id }, prefetched));
  });
}
