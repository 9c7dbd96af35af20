/** Buckets of a project: creation (idempotent), their pages, and the pages of one bucket's objects. */
import { createBucket, listBuckets, listObjects, type BucketRecord, type ObjectRecord } from '../../../shared/db/storage.ts';
import { nowIso } from '../../../shared/time.ts';
import type { Deps } from '../../context.ts';
import { pageOf, type AnsweredPage, type PageQuery } from '../pages.ts';
import { requireBucket } from './catalog.ts';

/** A bucket as answered (the interface contract "Bucket record"). */
export function bucketView(b: BucketRecord) {
  return { project: b.project, name: b.name, created_at: b.created_at };
}

/** Creates bucket `name` of `projectId`, or finds it already there (`created` false). */
export async function putBucket(deps: Deps, projectId: string, name: string): Promise<{ bucket: BucketRecord; created: boolean }> {
  return createBucket(deps.db, { project: projectId, name, created_at: nowIso(deps.now()) });
}

/** A page of the buckets of `projectId`, by name. */
export function bucketsPage(deps: Deps, projectId: string, query: PageQuery): Promise<AnsweredPage<BucketRecord>> {
  return pageOf(deps, ['buckets', projectId], query, (limit, after) => listBuckets(deps.db, projectId, limit, after));
}

/** A page of the objects of `bucket`, in key order; 404 before any cursor is opened when the bucket does not exist. */
export async function objectsPage(deps: Deps, projectId: string, bucket: string, query: PageQuery): Promise<AnsweredPage<ObjectRecord>> {
  await requireBucket(deps, projectId, bucket);
  return pageOf(deps, ['objects', projectId, bucket], query, (limit, after) => listObjects(deps.db, projectId, bucket, limit, after));
}
