/**
 * Routes: the tenant lifecycle (contract "States and transitions"; POST wakeup, POST sleep, GET head,
 * POST snapshots, POST restore) plus what users expect beside them: snapshot reads, snapshot
 * deletion, and the previous data directories restore keeps (docs/lifecycle.md "Previous data
 * directories"); declared in shared/api/lifecycle.ts. Owner session only. The route authenticates
 * and checks ownership; the project's host agent does the work and records the state
 * (handlers/domain/lifecycle.ts, docs/lifecycle.md).
 */
import { lifecycle } from '../../shared/api/index.ts';
import { requireOwnedProject, requireProjectForAgent } from '../auth.ts';
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
import { json } from '../http.ts';
import { implement } from '../implement.ts';

export const implementations = [
  implement(lifecycle.wakeup, requireProjectForAgent, async ({ caller }, ctx) => json(await wakeup(ctx.deps, { ...caller, requestId: ctx.requestId }))),

  implement(lifecycle.sleep, requireProjectForAgent, async ({ caller }, ctx) => json(await sleep(ctx.deps, { ...caller, requestId: ctx.requestId }))),

  implement(lifecycle.head, requireProjectForAgent, async ({ caller }, ctx) => json(await head(ctx.deps, { ...caller, requestId: ctx.requestId }))),

  implement(lifecycle.createSnapshot, requireProjectForAgent, async ({ caller, body }, ctx) =>
    json(await createSnapshot(ctx.deps, { ...caller, requestId: ctx.requestId, label: body.label ?? null }), 201),
  ),

  implement(lifecycle.listSnapshots, requireOwnedProject, async ({ caller, query }, ctx) => {
    const page = await listProjectSnapshots(ctx.deps, caller.project.id, query);
    return json({ snapshots: page.items, next_cursor: page.next_cursor });
  }),

  implement(lifecycle.readSnapshot, requireOwnedProject, async ({ caller, params }, ctx) => json(await snapshotOf(ctx.deps, caller.project.id, params.snapshot_id))),

  implement(lifecycle.deleteSnapshot, requireProjectForAgent, async ({ caller, params }, ctx) =>
    json(await deleteSnapshot(ctx.deps, { ...caller, requestId: ctx.requestId, snapshotId: params.snapshot_id })),
  ),

  implement(lifecycle.restore, requireProjectForAgent, async ({ caller, body }, ctx) =>
    json(await restore(ctx.deps, { ...caller, requestId: ctx.requestId, snapshotId: body.snapshot_id })),
  ),

  implement(lifecycle.listReplaced, requireProjectForAgent, async ({ caller, query }, ctx) => {
    const page = await listReplacedDirs(ctx.deps, { ...caller, requestId: ctx.requestId }, query);
    return json({ replaced: page.items, next_cursor: page.next_cursor });
  }),

  implement(lifecycle.discardReplaced, requireProjectForAgent, async ({ caller, params }, ctx) =>
    json(await discardReplacedDir(ctx.deps, { ...caller, requestId: ctx.requestId, name: params.name })),
  ),
];
