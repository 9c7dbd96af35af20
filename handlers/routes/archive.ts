/**
 * Routes: snapshot archives (docs/lifecycle.md "Export and import"; declared in
 * shared/api/lifecycle.ts): `GET …/snapshots/{snapshot_id}/archive` streams a snapshot as one tar,
 * `POST …/import` takes such a tar and restores it. Owner session only.
 */
import { lifecycle } from '../../shared/api/index.ts';
import { requireProjectForAgent } from '../auth.ts';
import { exportSnapshot, importSnapshot } from '../domain/archive.ts';
import { declaredLength, json } from '../http.ts';
import { implement } from '../implement.ts';

export const implementations = [
  implement(lifecycle.snapshotArchive, requireProjectForAgent, async ({ caller, params, request }, ctx) => {
    const archive = await exportSnapshot(ctx.deps, { ...caller, requestId: ctx.requestId, snapshotId: params.snapshot_id, signal: request.signal });
    return new Response(archive.body, { status: 200, headers: archive.headers });
  }),

  // 413 before a byte is read when the declared length is over the limit; the agent counts the rest.
  implement(lifecycle.importArchive, requireProjectForAgent, async ({ caller, request }, ctx) =>
    json(await importSnapshot(ctx.deps, { ...caller, requestId: ctx.requestId, body: request.body, length: declaredLength(request), signal: request.signal })),
  ),
];
