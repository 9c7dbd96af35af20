/**
 * Internal lifecycle routes of the host agent (docs/lifecycle.md "Internal API"). The handlers authenticate the
 * caller and check ownership, then call these with the state they read (`recorded`), which the agent
 * uses as the expected value of its conditional state write:
 *
 *   POST /internal/v1/projects/{id}/wakeup     {recorded}                → {state, updated_at}
 *   POST /internal/v1/projects/{id}/sleep      {recorded}                → {state, updated_at}
 *   POST /internal/v1/projects/{id}/reconcile  {recorded}                → {state, updated_at}
 *   POST /internal/v1/projects/{id}/head       {recorded}                → head answer
 *   POST /internal/v1/projects/{id}/snapshots  {recorded, label?}        → Snapshot
 *   POST /internal/v1/projects/{id}/restore    {recorded, snapshot_id}   → restore answer
 */
import { internalRestoreSchema, internalSnapshotSchema, tenantCallSchema } from '../../shared/schemas/lifecycle.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import { json, pathParam, readJson } from '../../shared/http/body.ts';
import type { InternalRouter } from '../internal-api.ts';
import { headAnswer, restoreAnswer } from './answers.ts';

type Routed = Request & { params: Record<string, string> };

/** Registers the lifecycle routes. */
export function register(router: InternalRouter): void {
  const projectOf = (request: Request) => pathParam((request as Routed).params.id, 'id', projectIdSchema);

  router.post('/internal/v1/projects/:id/wakeup', async (request, ctx) => {
    const projectId = projectOf(request);
    const body = await readJson(request, tenantCallSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    return json(await ctx.tenants.wakeup(projectId, body.recorded));
  });

  router.post('/internal/v1/projects/:id/sleep', async (request, ctx) => {
    const projectId = projectOf(request);
    const body = await readJson(request, tenantCallSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    return json(await ctx.tenants.sleep(projectId, body.recorded));
  });

  router.post('/internal/v1/projects/:id/reconcile', async (request, ctx) => {
    const projectId = projectOf(request);
    const body = await readJson(request, tenantCallSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    return json(await ctx.tenants.reconcile(projectId, body.recorded));
  });

  router.post('/internal/v1/projects/:id/head', async (request, ctx) => {
    const projectId = projectOf(request);
    const body = await readJson(request, tenantCallSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    return json(headAnswer(await ctx.tenants.head(projectId, body.recorded)));
  });

  router.post('/internal/v1/projects/:id/snapshots', async (request, ctx) => {
    const projectId = projectOf(request);
    const body = await readJson(request, internalSnapshotSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    return json(await ctx.tenants.snapshot(projectId, body.label ?? null), 201);
  });

  router.post('/internal/v1/projects/:id/restore', async (request, ctx) => {
    const projectId = projectOf(request);
    const body = await readJson(request, internalRestoreSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    return json(restoreAnswer(await ctx.tenants.restore(projectId, body.recorded, body.snapshot_id)));
  });
}
