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
 *
 * and the deletions the owner asks for, with who asked for the receipt (docs/lifecycle.md "Deleting
 * a snapshot", "Previous data directories"):
 *
 *   DELETE /internal/v1/projects/{id}/snapshots/{snapshot_id}  {actor, request_id}  → Snapshot removed
 *   GET    /internal/v1/projects/{id}/replaced?limit=&after=                       → {items, next}
 *   DELETE /internal/v1/projects/{id}/replaced/{name}          {actor, request_id}  → entry freed
 */
import { internalPaths, ROUTE_PARAMS } from '../../shared/internal-paths.ts';
import {
  internalDeletionSchema,
  internalReplacedQuerySchema,
  internalRestoreSchema,
  internalSnapshotSchema,
  tenantCallSchema,
  type InternalDeletion,
} from '../../shared/schemas/lifecycle.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import { replacedNameSchema, snapshotIdSchema } from '../../shared/schemas/snapshots.ts';
import { json, pathParam, readJson } from '../../shared/http/body.ts';
import { parseOr400 } from '../../shared/validation.ts';
import type { InternalRouter } from '../internal-api.ts';
import { timedOperation } from '../metrics.ts';
import { headAnswer, restoreAnswer } from './answers.ts';

type Routed = Request & { params: Record<string, string> };

/** The project and the public request's id (the handlers pass it on) of a timed operation's log line. */
const timing = (request: Request, projectId: string) => ({ projectId, requestId: request.headers.get('x-request-id') });

/** Registers the lifecycle routes. */
export function register(router: InternalRouter): void {
  const projectOf = (request: Request) => pathParam((request as Routed).params.id, 'id', projectIdSchema);

  router.post(internalPaths.lifecycle(ROUTE_PARAMS.id, 'wakeup'), async (request, ctx) => {
    const projectId = projectOf(request);
    const body = await readJson(request, tenantCallSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    return json(await timedOperation(ctx, 'wakeup', timing(request, projectId), () => ctx.tenants.wakeup(projectId, body.recorded)));
  });

  router.post(internalPaths.lifecycle(ROUTE_PARAMS.id, 'sleep'), async (request, ctx) => {
    const projectId = projectOf(request);
    const body = await readJson(request, tenantCallSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    return json(await timedOperation(ctx, 'sleep', timing(request, projectId), () => ctx.tenants.sleep(projectId, body.recorded)));
  });

  router.post(internalPaths.lifecycle(ROUTE_PARAMS.id, 'reconcile'), async (request, ctx) => {
    const projectId = projectOf(request);
    const body = await readJson(request, tenantCallSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    return json(await ctx.tenants.reconcile(projectId, body.recorded));
  });

  router.post(internalPaths.lifecycle(ROUTE_PARAMS.id, 'head'), async (request, ctx) => {
    const projectId = projectOf(request);
    const body = await readJson(request, tenantCallSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    return json(headAnswer(await ctx.tenants.head(projectId, body.recorded)));
  });

  router.post(internalPaths.lifecycle(ROUTE_PARAMS.id, 'snapshots'), async (request, ctx) => {
    const projectId = projectOf(request);
    const body = await readJson(request, internalSnapshotSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    const snapshot = await timedOperation(ctx, 'snapshot', timing(request, projectId), () => ctx.tenants.snapshot(projectId, body.label ?? null));
    // Copied off the machine after the answer (docs/lifecycle.md "Off-machine copies").
    return json(await ctx.backups.afterSnapshot(snapshot), 201);
  });

  router.post(internalPaths.lifecycle(ROUTE_PARAMS.id, 'restore'), async (request, ctx) => {
    const projectId = projectOf(request);
    const body = await readJson(request, internalRestoreSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    const restored = await timedOperation(ctx, 'restore', timing(request, projectId), () => ctx.tenants.restore(projectId, body.recorded, body.snapshot_id));
    return json(restoreAnswer(restored));
  });

  const deletionOf = (body: InternalDeletion) => ({ actor: body.actor, requestId: body.request_id });

  router.delete(internalPaths.snapshot(ROUTE_PARAMS.id, ROUTE_PARAMS.snapshotId), async (request, ctx) => {
    const projectId = projectOf(request);
    const snapshotId = pathParam((request as Routed).params.snapshot_id, 'snapshot_id', snapshotIdSchema);
    const body = await readJson(request, internalDeletionSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    const removed = await ctx.tenants.deleteSnapshot(projectId, snapshotId, deletionOf(body));
    // Its off-machine copy goes too (docs/lifecycle.md "Off-machine copies"); one left by a failure is removed at the next start.
    await ctx.backups.removeQuietly(projectId, snapshotId);
    return json(removed);
  });

  router.get(internalPaths.replaced(ROUTE_PARAMS.id), async (request, ctx) => {
    const projectId = projectOf(request);
    const query = parseOr400(internalReplacedQuerySchema, Object.fromEntries(new URL(request.url).searchParams), 'query');
    return json(await ctx.tenants.replaced(projectId, query.limit, query.after));
  });

  router.delete(internalPaths.replacedDir(ROUTE_PARAMS.id, ROUTE_PARAMS.name), async (request, ctx) => {
    const projectId = projectOf(request);
    const name = pathParam((request as Routed).params.name, 'name', replacedNameSchema);
    const body = await readJson(request, internalDeletionSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    return json(await ctx.tenants.discardReplaced(projectId, name, deletionOf(body)));
  });
}
