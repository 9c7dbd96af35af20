/**
 * The storage repository's records (the interface contract "Bucket record", "Object catalog row",
 * "Object states"; docs/storage.md "Catalog layout in DynamoDB"): their types, their items in the
 * table, and the one way a catalog change is committed (`guarded`). The operations are in
 * ./buckets.ts, ./catalog-reads.ts, ./catalog-writes.ts and ./catalog-listing.ts.
 */
import { TransactWriteCommand, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import type { BlobBackend } from '../blobs/store.ts';
import type { Db } from './client.ts';
import { cancellationReasons, isConditionFailure } from './client.ts';
import { objectKeyOf } from './catalog-keys.ts';

/** A bucket (contract "Bucket record"). */
export interface BucketRecord {
  project: string;
  name: string;
  created_at: string;
  /** Set while the bucket is being deleted: the token of the deletion (docs/storage.md "Deleting a bucket"). */
  deleting?: string;
}

/** Object states (contract "Object states"). */
export type ObjectState = 'pending' | 'stored';

/** A catalog row as answered (contract "Object catalog row"). */
export interface ObjectRow {
  id: string;
  project: string;
  bucket: string;
  key: string;
  size: number;
  etag: string;
  content_type: string;
  backend: BlobBackend;
  state: ObjectState;
  created_at: string;
  updated_at: string;
}

/** A catalog row as stored: the public fields plus the blob it points at (none while pending). */
export interface ObjectRecord extends ObjectRow {
  blob: string | null;
}

/** The public view of a row. */
export function objectView(r: ObjectRecord): ObjectRow {
  return {
    id: r.id,
    project: r.project,
    bucket: r.bucket,
    key: r.key,
    size: r.size,
    etag: r.etag,
    content_type: r.content_type,
    backend: r.backend,
    state: r.state,
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

/** A bucket as stored. */
export function toBucket(item: Record<string, any>): BucketRecord {
  const bucket: BucketRecord = { project: item.project, name: item.name, created_at: item.created_at };
  if (typeof item.deleting === 'string') bucket.deleting = item.deleting;
  return bucket;
}

/** A blob whose row a bucket deletion removed, not yet deleted from its store. */
export interface BlobDeletion {
  project: string;
  bucket: string;
  blob: string;
  backend: BlobBackend;
}

/** A catalog row as stored. */
export function toObject(item: Record<string, any>): ObjectRecord {
  return {
    id: item.id,
    project: item.project,
    bucket: item.bucket,
    key: item.key,
    size: item.size,
    etag: item.etag,
    content_type: item.content_type,
    backend: item.backend,
    state: item.state,
    created_at: item.created_at,
    updated_at: item.updated_at,
    blob: typeof item.blob === 'string' ? item.blob : null,
  };
}

/** The table item of a row: its keys (./catalog-keys.ts) and fields; no `blob` while pending. */
export async function itemOf(r: ObjectRecord): Promise<Record<string, unknown>> {
  const { pk, sk, grp } = await objectKeyOf(r.project, r.bucket, r.key);
  const { blob, ...row } = r;
  return { pk, sk, type: 'object', ...row, ...(blob !== null ? { blob } : {}), ...(grp !== null ? { grp } : {}) };
}

/** One item of a TransactWriteItems. */
export type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** Runs a transaction whose first item is the guarded catalog change: false when that guard failed. */
export async function guarded(db: Db, items: TransactItem[]): Promise<boolean> {
  try {
    await db.doc.send(new TransactWriteCommand({ TransactItems: items }));
    return true;
  } catch (err) {
    if (isConditionFailure(err)) {
      const reasons = cancellationReasons(err);
      if (reasons[0] === 'ConditionalCheckFailed' || reasons.includes('TransactionConflict')) return false;
    }
    throw err;
  }
}
