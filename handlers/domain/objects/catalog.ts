/**
 * The catalog reads every object rule starts from: the caller's project with a bucket and a row,
 * the bucket alone, and the refusals they lead to (docs/storage.md "Catalog layout in DynamoDB").
 */
import type { SessionClaims } from '../../../shared/auth.ts';
import { batchGetItems } from '../../../shared/db/client.ts';
import type { ProjectRecord } from '../../../shared/db/projects.ts';
import { catalogKeys, getBucket, type BucketRecord, type ObjectRecord } from '../../../shared/db/storage.ts';
import { errors, type ServiceError } from '../../../shared/errors.ts';
import type { Deps } from '../../context.ts';
import { confirmSession } from '../sessions.ts';

/** Attempts at a conditional catalog change before giving up with 409 (each one re-reads the row). */
export const FLIP_ATTEMPTS = 10;

/** The wait before attempt `attempt + 1` at a conditional change: random, growing with the attempts. */
export const backOff = (attempt: number): Promise<void> => new Promise((r) => setTimeout(r, Math.random() * 10 * attempt));

/**
 * Who reads an object: the owner's session (its token's claims, whose standing is judged in the
 * catalog's own read), or a signed URL (signed-urls.ts), which already names the one object it
 * opens and needs no account.
 */
export type ObjectAccess = { session: SessionClaims } | { signed: true };

/**
 * The caller's project with one of its buckets and the row of `bucket/key` (when `key` is given),
 * read in one DynamoDB round trip together with the session's standing (a batched read, not four
 * calls) on the byte routes: 401 when the session has ended, then 404 for anything but the
 * caller's own project. The reads have no effect, and nothing about the bucket or the row is used
 * before both hold: a stranger still gets 404 and learns nothing from them.
 */
export function ownedWith(
  deps: Deps,
  session: SessionClaims,
  projectId: string,
  bucket: string,
  key: string | null,
): Promise<{ project: ProjectRecord; bucket: BucketRecord | null; object: ObjectRecord | null }> {
  return accessWith(deps, { session }, projectId, bucket, key);
}

/**
 * `ownedWith` for either kind of access: a signed URL needs the project to exist (a deleted one is
 * 404 to it too), a session needs to stand and to own it.
 */
export async function accessWith(
  deps: Deps,
  access: ObjectAccess,
  projectId: string,
  bucket: string,
  key: string | null,
): Promise<{ project: ProjectRecord; bucket: BucketRecord | null; object: ObjectRecord | null }> {
  const catalog = await catalogKeys(projectId, bucket, key);
  const items = 'session' in access ? (await confirmSession(deps, access.session, catalog.keys)).items : await batchGetItems(deps.db, catalog.keys);
  const read = catalog.read(items);
  // As getOwnedProject: anything but the caller's own project is 404, never a hint that it exists.
  if (!read.project) throw errors.notFound(`project ${projectId} not found`);
  if ('session' in access) {
    const { accountId } = access.session;
    if (read.project.owner !== accountId) throw errors.notFound(`project ${projectId} not found`);
    deps.placement.rememberOwner(projectId, accountId);
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
