/**
 * Repository: buckets (the interface contract "Bucket record"; docs/storage.md "Catalog layout in
 * DynamoDB", "Deleting a bucket"). A bucket is `PRJ#<prj>` / `BKT#<bucket>` (shared/db/table.ts).
 *
 * A row is created only while its bucket exists and is not being deleted: the creating transaction
 * checks the bucket item too (`bucketOpenCheck`, `bucketRefusal`). Rows a bucket deletion removed
 * leave a blob-deletion record (`BLOBDEL#<bucket>#<blob>`) in the same transaction, until their blob
 * is gone: every blob is always named by a row or by such a record.
 */
import { DeleteCommand, GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { errors, type ServiceError } from '../errors.ts';
import type { Db } from './client.ts';
import { isConditionFailure } from './client.ts';
import type { Page } from './pagination.ts';
import { listProjectItems } from './pagination.ts';
import { receiptPut, type Receipt } from './receipts.ts';
import { blobDeletionKey, blobDeletionPrefix, objectPrefix } from './catalog-keys.ts';
import { guarded, toBucket, type BlobDeletion, type BucketRecord, type TransactItem } from './storage-records.ts';
import { keys, prefixes } from './table.ts';

/** Creates a bucket unless it exists; answers the bucket as stored and whether this call created it. */
export async function createBucket(db: Db, bucket: BucketRecord): Promise<{ bucket: BucketRecord; created: boolean }> {
  const key = keys.bucket(bucket.project, bucket.name);
  try {
    await db.doc.send(
      new PutCommand({
        TableName: db.table,
        Item: { ...key, type: 'bucket', ...bucket },
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
    return { bucket, created: true };
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
  const existing = await getBucket(db, bucket.project, bucket.name);
  if (!existing) throw errors.conflict(`bucket ${bucket.name} changed concurrently, retry`);
  return { bucket: existing, created: false };
}

/** Reads a bucket, or null. */
export async function getBucket(db: Db, projectId: string, name: string): Promise<BucketRecord | null> {
  const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: keys.bucket(projectId, name), ConsistentRead: true }));
  return out.Item ? toBucket(out.Item) : null;
}

/** Lists a project's buckets by name. */
export async function listBuckets(db: Db, projectId: string, limit: number, cursor?: string): Promise<Page<BucketRecord>> {
  const page = await listProjectItems(db, projectId, prefixes.bucket, { limit, cursor }, { consistent: true });
  return { items: page.items.map(toBucket), nextCursor: page.nextCursor };
}

/** The condition a row's creation puts on its bucket: it exists and is not being deleted. */
const BUCKET_OPEN = {
  ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(#deleting)',
  ExpressionAttributeNames: { '#deleting': 'deleting' },
} as const;

/** The transaction item checking that `bucket` of `projectId` takes new rows. */
export function bucketOpenCheck(db: Db, projectId: string, bucket: string): TransactItem {
  return { ConditionCheck: { TableName: db.table, Key: keys.bucket(projectId, bucket), ...BUCKET_OPEN } };
}

/** Why a row could not be created in `bucket`: it is gone (404) or being deleted (409). */
export async function bucketRefusal(db: Db, projectId: string, bucket: string): Promise<ServiceError> {
  const b = await getBucket(db, projectId, bucket);
  if (!b) return errors.notFound(`bucket ${bucket} not found`);
  if (b.deleting !== undefined) return errors.conflict(`bucket ${bucket} is being deleted`);
  return errors.conflict(`bucket ${bucket} changed concurrently, retry`);
}

/**
 * Marks a bucket as being deleted, unless it already is (the first deletion's token stays, so two
 * deletions of one bucket share it). From then on no row is created in it. Answers the bucket as
 * marked, or null when it does not exist.
 */
export async function markBucketDeleting(db: Db, projectId: string, bucket: string, token: string): Promise<BucketRecord | null> {
  try {
    const out = await db.doc.send(
      new UpdateCommand({
        TableName: db.table,
        Key: keys.bucket(projectId, bucket),
        UpdateExpression: 'SET #deleting = if_not_exists(#deleting, :token)',
        ConditionExpression: 'attribute_exists(pk)',
        ExpressionAttributeNames: { '#deleting': 'deleting' },
        ExpressionAttributeValues: { ':token': token },
        ReturnValues: 'ALL_NEW',
      }),
    );
    return out.Attributes ? toBucket(out.Attributes) : null;
  } catch (err) {
    if (isConditionFailure(err)) return null;
    throw err;
  }
}

/** Lifts the mark `token` set (a deletion that found the bucket not empty); another token's mark stays. */
export async function unmarkBucketDeleting(db: Db, projectId: string, bucket: string, token: string): Promise<void> {
  try {
    await db.doc.send(
      new UpdateCommand({
        TableName: db.table,
        Key: keys.bucket(projectId, bucket),
        UpdateExpression: 'REMOVE #deleting',
        ConditionExpression: '#deleting = :token',
        ExpressionAttributeNames: { '#deleting': 'deleting' },
        ExpressionAttributeValues: { ':token': token },
      }),
    );
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}

/** True when `bucket` has at least one catalog row, pending or stored (a consistent read). */
export async function bucketHasRows(db: Db, projectId: string, bucket: string): Promise<boolean> {
  const out = await db.doc.send(
    new QueryCommand({
      TableName: db.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
      ExpressionAttributeValues: { ':pk': keys.objectsOf(projectId).pk, ':prefix': objectPrefix(bucket) },
      ProjectionExpression: 'pk',
      Limit: 1,
      ConsistentRead: true,
    }),
  );
  return (out.Items ?? []).length > 0;
}

/**
 * Removes a bucket being deleted under `bucket.deleting`, with `receipt`, in one transaction. False
 * when it is no longer there under that mark (another deletion finished it).
 */
export async function removeBucket(db: Db, bucket: BucketRecord, receipt: Receipt): Promise<boolean> {
  if (bucket.deleting === undefined) throw new Error(`bucket ${bucket.name} is not marked for deletion`);
  return guarded(db, [
    {
      Delete: {
        TableName: db.table,
        Key: keys.bucket(bucket.project, bucket.name),
        ConditionExpression: '#deleting = :token',
        ExpressionAttributeNames: { '#deleting': 'deleting' },
        ExpressionAttributeValues: { ':token': bucket.deleting },
      },
    },
    receiptPut(db, receipt),
  ]);
}

/**
 * Up to `limit` blob-deletion records of `bucket` (every bucket of the project when null), read
 * consistently: blobs whose rows are gone and whose bytes may still be in their store.
 */
export async function listBlobDeletions(db: Db, projectId: string, bucket: string | null, limit: number): Promise<BlobDeletion[]> {
  const out = await db.doc.send(
    new QueryCommand({
      TableName: db.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
      ExpressionAttributeValues: { ':pk': keys.objectsOf(projectId).pk, ':prefix': bucket === null ? prefixes.blobDeletion : blobDeletionPrefix(bucket) },
      Limit: limit,
      ConsistentRead: true,
    }),
  );
  return (out.Items ?? []).map((i) => ({ project: i.project, bucket: i.bucket, blob: i.blob, backend: i.backend }));
}

/** Forgets a blob-deletion record once its blob is gone from the store. */
export async function forgetBlobDeletion(db: Db, deletion: BlobDeletion): Promise<void> {
  await db.doc.send(new DeleteCommand({ TableName: db.table, Key: blobDeletionKey(deletion.project, deletion.bucket, deletion.blob) }));
}
