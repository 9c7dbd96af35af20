/**
 * Routes: the tenant lifecycle (contract "States and transitions"; POST wakeup, POST sleep, GET head,
 * POST snapshots, POST restore) plus what users expect beside them: snapshot reads (`GET …/snapshots`,
 * newest first and paginated; `GET …/snapshots/{snapshot_id}`), `DELETE …/snapshots/{snapshot_id}`,
 * and the previous data directories restore keeps (`GET …/replaced`, `DELETE …/replaced/{name}`;
 * docs/lifecycle.md "Previous data directories"). Owner session only. The route authenticates and checks ownership; the
 * project's host agent does the work and records the state (handlers/domain/lifecycle.ts,
 * docs/lifecycle.md). Wakeup, sleep and head take no body and no query: either is 400 (docs/api.md
 * "Decisions").
 */
import { pageQuerySchema } from '../../shared/schemas/pagination.ts';
import { createSnapshotRequestSchema, replacedNameSchema, restoreRequestSchema, snapshotIdSchema } from '../../shared/schemas/snapshots.ts';
import { requireOwnedProject, requireProjectForAgent } from '../auth.ts';
import type { Routes } from '../context.ts';
import {
  createSnapshot,
  deleteSnapshot,
  discardReplacedDir,
  head,
  listProjectSnapshots,
  listReplacedDirs,
  restore,
  sleep,
  snapshotOf,
  wakeup,
} from '../domain/lifecycle.ts';
import { json, noBody, noInput, pathParam, queryOf, readJson } from '../http.ts';

/** Registers the lifecycle routes. */
export function register(router: Routes): void {
  router.post('/v0/projects/:id/wakeup', async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    await noInput(request);
    return json(await wakeup(ctx.deps, { ...owned, requestId: ctx.requestId }));
  });

  router.post('/v0/projects/:id/sleep', async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    await noInput(request);
    return json(await sleep(ctx.deps, { ...owned, requestId: ctx.requestId }));
  });

  router.get('/v0/projects/:id/head', async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    await noInput(request);
    return json(await head(ctx.deps, { ...owned, requestId: ctx.requestId }));
  });

  router.post('/v0/projects/:id/snapshots', async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    const body = await readJson(request, createSnapshotRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    return json(await createSnapshot(ctx.deps, { ...owned, requestId: ctx.requestId, label: body.label ?? null }), 201);
  });

  router.get('/v0/projects/:id/snapshots', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await listProjectSnapshots(ctx.deps, project.id, query);
    return json({ snapshots: page.items, next_cursor: page.next_cursor });
  });

  router.get('/v0/projects/:id/snapshots/:snapshot_id', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const snapshotId = pathParam(request.params.snapshot_id, 'snapshot_id', snapshotIdSchema);
    await noInput(request);
    return json(await snapshotOf(ctx.deps, project.id, snapshotId));
  });

  router.delete('/v0/projects/:id/snapshots/:snapshot_id', async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    const snapshotId = pathParam(request.params.snapshot_id, 'snapshot_id', snapshotIdSchema);
    await noInput(request);
    return json(await deleteSnapshot(ctx.deps, { ...owned, requestId: ctx.requestId, snapshotId }));
  });

  router.post('/v0/projects/:id/restore', async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    const body = await readJson(request, restoreRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    return json(await restore(ctx.deps, { ...owned, requestId: ctx.requestId, snapshotId: body.snapshot_id }));
  });

  router.get('/v0/projects/:id/replaced', async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await listReplacedDirs(ctx.deps, { ...owned, requestId: ctx.requestId }, query);
    return json({ replaced: page.items, next_cursor: page.next_cursor });
  });

  router.delete('/v0/projects/:id/replaced/:name', async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    const name = pathParam(request.params.name, 'name', replacedNameSchema);
    await noInput(request);
    return json(await discardReplacedDir(ctx.deps, { ...owned, requestId: ctx.requestId, name }));
  });
}
