/**
 * Buckets of a project: creation (idempotent), their pages, and the pages of one bucket's listing
 * (deletion is bucket-delete.ts).
 */
import { createBucket, listBuckets, listCatalog, type BucketRecord, type CatalogEntry } from '../../../shared/db/storage.ts';
import { errors } from '../../../shared/errors.ts';
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
  const put = await createBucket(deps.db, { project: projectId, name, created_at: nowIso(deps.now()) });
  // A deletion cut short left it marked: it is not "already there" until that DELETE is repeated.
  if (put.bucket.deleting !== undefined) throw errors.conflict(`bucket ${name} is being deleted: repeat its DELETE to finish, then create it again`);
  return put;
}

/** A page of the buckets of `projectId`, by name. */
export function bucketsPage(deps: Deps, projectId: string, query: PageQuery): Promise<AnsweredPage<BucketRecord>> {
  return pageOf(deps, ['buckets', projectId], query, (limit, after) => listBuckets(deps.db, projectId, limit, after));
}

/** A listing query: a page, and optionally a prefix and a delimiter (S3's ListObjectsV2). */
export interface ListingQuery extends PageQuery {
  prefix?: string | undefined;
  delimiter?: string | undefined;
}

/**
 * A page of the listing of `bucket`, in key order: its rows, and with a delimiter the common
 * prefixes among them; 404 before any cursor is opened when the bucket does not exist. A cursor is
 * bound to the bucket, the prefix and the delimiter it was issued for.
 */
export async function objectsPage(deps: Deps, projectId: string, bucket: string, query: ListingQuery): Promise<AnsweredPage<CatalogEntry>> {
  await requireBucket(deps, projectId, bucket);
  const prefix = query.prefix || undefined;
  const { delimiter } = query;
  // The listing without prefix or delimiter keeps the list name its cursors always had; JSON keeps
  // the two apart whatever they hold (a NUL included).
  const list = ['objects', projectId, bucket, ...(prefix === undefined && delimiter === undefined ? [] : [JSON.stringify([prefix ?? '', delimiter ?? null])])];
  return pageOf(deps, list, query, (limit, after) => listCatalog(deps.db, projectId, bucket, { limit, cursor: after, prefix, delimiter }));
}
