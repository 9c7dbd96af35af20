/**
 * Routes: buckets (the interface contract "PUT/GET storage/buckets"; their deletion,
 * docs/storage.md "Deleting a bucket").
 */
import { pageQuerySchema } from '../../shared/schemas/pagination.ts';
import { bucketNameSchema, deleteBucketQuerySchema } from '../../shared/schemas/storage.ts';
import { requireOwnedProject } from '../auth.ts';
import type { Routes } from '../context.ts';
import { deleteBucket } from '../domain/objects/bucket-delete.ts';
import { bucketView, bucketsPage, putBucket } from '../domain/objects/buckets.ts';
import { json, noBody, noInput, pathParam, queryOf } from '../http.ts';

/** Registers the bucket routes. */
export function register(router: Routes): void {
  router.put('/v0/projects/:id/storage/buckets/:bucket', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const name = pathParam(request.params.bucket, 'bucket', bucketNameSchema);
    await noInput(request);
    const { bucket, created } = await putBucket(ctx.deps, project.id, name);
    return json(bucketView(bucket), created ? 201 : 200);
  });

  router.get('/v0/projects/:id/storage/buckets', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await bucketsPage(ctx.deps, project.id, query);
    return json({ buckets: page.items.map(bucketView), next_cursor: page.next_cursor });
  });

  router.delete('/v0/projects/:id/storage/buckets/:bucket', async (request, ctx) => {
    const { accountId, project } = await requireOwnedProject(request, ctx);
    const name = pathParam(request.params.bucket, 'bucket', bucketNameSchema);
    const query = queryOf(new URL(request.url), deleteBucketQuerySchema);
    await noBody(request);
    const bucket = await deleteBucket(ctx.deps, { requestId: ctx.requestId, accountId, project, bucket: name, force: query.force ?? false });
    return json(bucketView(bucket));
  });
}
