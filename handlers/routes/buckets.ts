/**
 * Routes: buckets (the interface contract "PUT/GET storage/buckets"; their deletion,
 * docs/storage.md "Deleting a bucket"; declared in shared/api/storage.ts).
 */
import { storage } from '../../shared/api/index.ts';
import { requireOwnedProject } from '../auth.ts';
import { deleteBucket } from '../domain/objects/bucket-delete.ts';
import { bucketView, bucketsPage, putBucket } from '../domain/objects/buckets.ts';
import { json } from '../http.ts';
import { implement } from '../implement.ts';

export const implementations = [
  implement(storage.putBucket, requireOwnedProject, async ({ caller, params }, ctx) => {
    const { bucket, created } = await putBucket(ctx.deps, caller.project.id, params.bucket);
    return json(bucketView(bucket), created ? 201 : 200);
  }),

  implement(storage.listBuckets, requireOwnedProject, async ({ caller, query }, ctx) => {
    const page = await bucketsPage(ctx.deps, caller.project.id, query);
    return json({ buckets: page.items.map(bucketView), next_cursor: page.next_cursor });
  }),

  implement(storage.deleteBucket, requireOwnedProject, async ({ caller: { accountId, project }, params, query }, ctx) => {
    const bucket = await deleteBucket(ctx.deps, { requestId: ctx.requestId, accountId, project, bucket: params.bucket, force: query.force ?? false });
    return json(bucketView(bucket));
  }),
];
