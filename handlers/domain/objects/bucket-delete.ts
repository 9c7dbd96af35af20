/**
 * Deleting a bucket (docs/storage.md "Deleting a bucket"): refused while it holds objects, unless
 * forced, when every object is deleted first exactly as `DELETE …/objects` deletes one (row and
 * `object.delete` receipt in one transaction, then the bytes), then the bucket with its
 * `bucket.delete` receipt.
 *
 * Crash-safe by construction. The bucket is marked first, and from then on no row is created in it
 * (every creating transaction checks the mark, shared/db/storage.ts), so the deletion ends. A row
 * leaves with a blob-deletion record naming its blob, in the same transaction; the record is
 * forgotten only once the blob is gone. So at any point every blob is named by a row or by a
 * record, and no row names a deleted blob. A deletion cut short leaves the bucket marked, with fewer
 * objects; the next DELETE of it finishes the records and goes on.
 */
import type { BlobStore } from '../../../shared/blobs/store.ts';
import { newReceipt } from '../../../shared/db/receipts.ts';
import {
  bucketHasRows,
  forgetBlobDeletion,
  getBucket,
  listBlobDeletions,
  listObjects,
  markBucketDeleting,
  removeBucket,
  unmarkBucketDeleting,
  type BlobDeletion,
  type BucketRecord,
} from '../../../shared/db/storage.ts';
import { errors } from '../../../shared/errors.ts';
import { nowIso } from '../../../shared/time.ts';
import type { Deps } from '../../context.ts';
import { storeFor } from './blobs.ts';
import { removeRow, type Deleter } from './delete.ts';

/** Rows read per page, and removed at once, by a forced deletion. */
const PAGE = 100;
const WIDTH = 8;

/** A DELETE of `bucket`: `force` deletes its objects first. */
export interface BucketDeletion extends Deleter {
  bucket: string;
  force: boolean;
}

function notEmpty(bucket: string) {
  return errors.conflict(`bucket ${bucket} is not empty: delete its objects first, or DELETE it with ?force=true`);
}

/** Deletes a bucket of the caller's project; answers the bucket removed. */
export async function deleteBucket(deps: Deps, input: BucketDeletion): Promise<BucketRecord> {
  const { db } = deps;
  const { requestId, accountId, project, bucket, force } = input;
  const found = await getBucket(db, project.id, bucket);
  if (!found) throw errors.notFound(`bucket ${bucket} not found`);
  // Refused at once when it visibly holds objects: writers are not held up for nothing.
  if (!force && (await bucketHasRows(db, project.id, bucket))) throw notEmpty(bucket);

  const marked = await markBucketDeleting(db, project.id, bucket, requestId);
  if (!marked) throw errors.notFound(`bucket ${bucket} not found`);
  if (force) {
    await removeEveryRow(deps, input);
  } else if (await bucketHasRows(db, project.id, bucket)) {
    // A row was created before the mark: the bucket stays as it was (another deletion's mark too).
    await unmarkBucketDeleting(db, project.id, bucket, requestId);
    throw notEmpty(bucket);
  }
  // Blobs of rows an earlier deletion removed, when it was cut short before their bytes were gone.
  await finishBlobDeletions(deps, input);

  const receipt = newReceipt({ project: project.id, op: 'bucket.delete', target: bucket, actor: accountId, request_id: requestId, at: nowIso(deps.now()) });
  if (!(await removeBucket(db, marked, receipt))) throw errors.notFound(`bucket ${bucket} not found`);
  return marked;
}

/**
 * Removes every row of the marked bucket, each with its receipt and blob-deletion record, then its
 * bytes, a page at a time, until none is left (none can be created meanwhile).
 */
async function removeEveryRow(deps: Deps, input: BucketDeletion): Promise<void> {
  for (;;) {
    const { items } = await listObjects(deps.db, input.project.id, input.bucket, PAGE);
    if (items.length === 0) return;
    await eachAtMost(WIDTH, items, async (row) => {
      const removed = await removeRow(deps, input, input.bucket, row.key, { first: row, recordBlob: true });
      const blob = removed?.row.blob;
      if (removed && blob) await deleteRecordedBlob(deps, { project: input.project.id, bucket: input.bucket, blob, backend: removed.row.backend }, input, removed.store);
    });
  }
}

/** Deletes the bytes of every blob-deletion record of the bucket, and the records. */
async function finishBlobDeletions(deps: Deps, input: BucketDeletion): Promise<void> {
  for (;;) {
    const records = await listBlobDeletions(deps.db, input.project.id, input.bucket, PAGE);
    if (records.length === 0) return;
    await eachAtMost(WIDTH, records, (record) => deleteRecordedBlob(deps, record, input));
  }
}

/**
 * Deletes a recorded blob's bytes, then forgets the record. A failure is thrown, not logged: the
 * record keeps the blob named, and the next DELETE of the bucket tries again.
 */
async function deleteRecordedBlob(deps: Deps, record: BlobDeletion, who: Deleter, store?: BlobStore): Promise<void> {
  const s = store ?? (await storeFor(deps, who.requestId, who.project, record.backend));
  await s.delete(record.project, record.blob);
  await forgetBlobDeletion(deps.db, record);
}

/**
 * Runs `task` on every item, at most `width` at a time. The first failure stops new starts; the
 * ones under way finish (each leaves a consistent state), then it is thrown.
 */
async function eachAtMost<T>(width: number, items: readonly T[], task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | null = null;
  const worker = async () => {
    while (failure === null && next < items.length) {
      const item = items[next++]!;
      try {
        await task(item);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  if (failure !== null) throw (failure as { error: unknown }).error;
}
