/**
 * The catalog reads every object rule starts from: the caller's project with a bucket and a row,
 * the bucket alone, and the refusals they lead to (docs/storage.md "Catalog layout in DynamoDB").
 */
import type { ProjectRecord } from '../../../shared/db/projects.ts';
import { getBucket, getProjectBucketObject, type BucketRecord, type ObjectRecord } from '../../../shared/db/storage.ts';
import { errors, type ServiceError } from '../../../shared/errors.ts';
import type { Deps } from '../../context.ts';

/** Attempts at a conditional catalog change before giving up with 409 (each one re-reads the row). */
export const FLIP_ATTEMPTS = 10;

/** The wait before attempt `attempt + 1` at a conditional change: random, growing with the attempts. */
export const backOff = (attempt: number): Promise<void> => new Promise((r) => setTimeout(r, Math.random() * 10 * attempt));

/**
 * Who reads an object: the owner's session (its account), or a signed URL (signed-urls.ts), which
 * already names the one object it opens and needs no account.
 */
export type ObjectAccess = { accountId: string } | { signed: true };

/**
 * The caller's project with one of its buckets and the row of `bucket/key` (when `key` is given),
 * read in one DynamoDB round trip (a batched read, not three calls) on the byte routes. The reads
 * have no effect, and nothing about the bucket or the row is used before ownership holds: a
 * stranger still gets 404 and learns nothing from them.
 */
export function ownedWith(
  deps: Deps,
  accountId: string,
  projectId: string,
  bucket: string,
  key: string | null,
): Promise<{ project: ProjectRecord; bucket: BucketRecord | null; object: ObjectRecord | null }> {
  return accessWith(deps, { accountId }, projectId, bucket, key);
}

/**
 * `ownedWith` for either kind of access: a signed URL needs the project to exist (a deleted one is
 * 404 to it too), a session needs to own it.
 */
export async function accessWith(
  deps: Deps,
  access: ObjectAccess,
  projectId: string,
  bucket: string,
  key: string | null,
): Promise<{ project: ProjectRecord; bucket: BucketRecord | null; object: ObjectRecord | null }> {
  const read = await getProjectBucketObject(deps.db, projectId, bucket, key);
  // As getOwnedProject: anything but the caller's own project is 404, never a hint that it exists.
  if (!read.project) throw errors.notFound(`project ${projectId} not found`);
  if ('accountId' in access) {
    if (read.project.owner !== access.accountId) throw errors.notFound(`project ${projectId} not found`);
    deps.placement.rememberOwner(projectId, access.accountId);
  }
  return { project: read.project, bucket: read.bucket, object: read.object };
}

/** The bucket `bucket` of `projectId`; 404 when it does not exist. */
export async function requireBucket(deps: Deps, projectId: string, bucket: string): Promise<BucketRecord> {
  const b = await getBucket(deps.db, projectId, bucket);
  if (!b) throw errors.notFound(`bucket ${bucket} not found`);
  return b;
}

/**
 * Why `bucket` as read takes no new bytes: 404 when it does not exist, 409 while it is being
 * deleted (docs/storage.md "Deleting a bucket"); null when it takes them.
 */
export function closedBucket(record: BucketRecord | null, bucket: string): ServiceError | null {
  if (!record) return errors.notFound(`bucket ${bucket} not found`);
  if (record.deleting !== undefined) return errors.conflict(`bucket ${bucket} is being deleted`);
  return null;
}

/** 404 for an object that has no row, or (`pending`) no bytes yet. */
export function notFoundObject(bucket: string, key: string, pending = false): ServiceError {
  return errors.notFound(pending ? `object ${bucket}/${key} has no bytes yet (pending)` : `object ${bucket}/${key} not found`);
}
