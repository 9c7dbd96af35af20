/** Buckets of a project: creation (idempotent), their pages, and the pages of one bucket's objects. */
import type { Page } from '../../../shared/db/pagination.ts';
import { createBucket, listBuckets, listObjects, type BucketRecord, type ObjectRecord } from '../../../shared/db/storage.ts';
import { nowIso } from '../../../shared/time.ts';
import type { Deps } from '../../context.ts';
import { requireBucket } from './catalog.ts';

/** A bucket as answered (the interface contract "Bucket record"). */
export function bucketView(b: BucketRecord) {
  return { project: b.project, name: b.name, created_at: b.created_at };
}

/** Creates bucket `name` of `projectId`, or finds it already there (`created` false). */
export async function putBucket(deps: Deps, projectId: string, name: string): Promise<{ bucket: BucketRecord; created: boolean }> {
  return createBucket(deps.db, { project: projectId, name, created_at: nowIso(deps.now()) });
}

/** A page of the buckets of `projectId`. */
export function bucketsPage(deps: Deps, projectId: string, limit: number, after: string | undefined): Promise<Page<BucketRecord>> {
  return listBuckets(deps.db, projectId, limit, after);
}

/**
 * The reader of pages of `bucket`'s objects, once the bucket is known to exist (404 otherwise,
 * before any cursor is opened).
 */
export async function objectPages(
  deps: Deps,
  projectId: string,
  bucket: string,
): Promise<(limit: number, after: string | undefined) => Promise<Page<ObjectRecord>>> {
  await requireBucket(deps, projectId, bucket);
  return (limit, after) => listObjects(deps.db, projectId, bucket, limit, after);
}
