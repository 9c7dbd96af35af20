/**
 * Repository: writes of the object catalog (the interface contract "Object states", "Receipts";
 * docs/storage.md "Nothing lost").
 *
 * A row changes only by a conditional write on what the writer read: absent
 * (`attribute_not_exists`), the pending row of a ticket (no blob, same id), or the blob it pointed
 * at. A failed condition is reported as a conflict, and the caller re-reads and tries again. Each
 * change carries its receipt in the same TransactWriteItems (docs/interface.md).
 *
 * A row is created only while its bucket exists and is not being deleted: the creating transaction
 * checks the bucket item too (docs/storage.md "Deleting a bucket"). A replace needs no such check: a
 * bucket deletion removes rows by the same conditional writes, so whichever comes second re-reads.
 */
import { TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { errors } from '../errors.ts';
import type { Db } from './client.ts';
import { cancellationReasons, isConditionFailure } from './client.ts';
import { receiptPut, type Receipt } from './receipts.ts';
import { blobDeletionKey, objectKeyOf } from './catalog-keys.ts';
import { bucketOpenCheck, bucketRefusal } from './buckets.ts';
import { getObject } from './catalog-reads.ts';
import { guarded, itemOf, type BlobDeletion, type ObjectRecord, type TransactItem } from './storage-records.ts';

/**
 * Reserves a pending row (upload ticket) unless a row exists. Answers the row as it now stands,
 * and whether this call created it; an existing row, pending or stored, is left untouched. A new
 * row needs its bucket open: 404 when it is gone, 409 while it is being deleted.
 */
export async function reserveObject(db: Db, pending: ObjectRecord): Promise<{ record: ObjectRecord; created: boolean }> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const outcome = await guardedCreate(db, pending.project, pending.bucket, [
      { Put: { TableName: db.table, Item: await itemOf(pending), ConditionExpression: 'attribute_not_exists(pk)' } },
    ]);
    if (outcome === 'done') return { record: pending, created: true };
    const existing = await getObject(db, pending.project, pending.bucket, pending.key);
    if (existing) return { record: existing, created: false };
  }
  throw errors.conflict(`object ${pending.bucket}/${pending.key} is changing concurrently, retry`);
}

type Condition = Pick<NonNullable<TransactItem['Put']>, 'ConditionExpression' | 'ExpressionAttributeNames' | 'ExpressionAttributeValues'>;

/** The condition that `prev` (what the writer read) still stands. */
function unchangedSince(prev: ObjectRecord | null): Condition {
  if (!prev) return { ConditionExpression: 'attribute_not_exists(pk)' };
  // `blob` is a DynamoDB reserved word: always through a name placeholder.
  if (prev.blob !== null) {
    return { ConditionExpression: '#blob = :prevBlob', ExpressionAttributeNames: { '#blob': 'blob' }, ExpressionAttributeValues: { ':prevBlob': prev.blob } };
  }
  return {
    ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(#blob) AND #id = :prevId',
    ExpressionAttributeNames: { '#blob': 'blob', '#id': 'id' },
    ExpressionAttributeValues: { ':prevId': prev.id },
  };
}

/**
 * An entity-tag condition of a conditional PUT (RFC 9110 §13.1.1, §13.1.2): `*` (any stored bytes)
 * or a list of etags as the catalog holds them (unquoted).
 */
export type EtagCondition = '*' | readonly string[];

/** The preconditions of a PUT (`If-Match`, `If-None-Match`), null where the request sent none. */
export interface PutPrecondition {
  ifMatch: EtagCondition | null;
  ifNoneMatch: EtagCondition | null;
}

/**
 * The precondition as a DynamoDB condition on the row (null: nothing to add). Together with
 * `unchangedSince` it makes the flip itself the check: no other write can come between them.
 */
function preconditionOf(pre: PutPrecondition | undefined): Condition | null {
  if (!pre || (pre.ifMatch === null && pre.ifNoneMatch === null)) return null;
  const terms: string[] = [];
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  const list = (etags: readonly string[], tag: string) =>
    etags
      .map((etag, i) => {
        values[`:${tag}${i}`] = etag;
        return `:${tag}${i}`;
      })
      .join(', ');
  if (pre.ifMatch !== null) {
    names['#state'] = 'state';
    values[':stored'] = 'stored';
    terms.push('#state = :stored');
    if (pre.ifMatch !== '*') {
      names['#etag'] = 'etag';
      terms.push(`#etag IN (${list(pre.ifMatch, 'im')})`);
    }
  }
  if (pre.ifNoneMatch !== null) {
    names['#blob'] = 'blob';
    if (pre.ifNoneMatch === '*') {
      terms.push('attribute_not_exists(#blob)');
    } else {
      names['#etag'] = 'etag';
      // NOT binds looser than IN, AND tighter than OR; DynamoDB refuses redundant parentheses.
      terms.push(`(attribute_not_exists(#blob) OR NOT #etag IN (${list(pre.ifNoneMatch, 'inm')}))`);
    }
  }
  // DynamoDB refuses an empty map of values.
  return { ConditionExpression: terms.join(' AND '), ExpressionAttributeNames: names, ...(Object.keys(values).length > 0 ? { ExpressionAttributeValues: values } : {}) };
}

/** Both conditions at once: each is a conjunction whose OR terms carry their own parentheses. */
function bothOf(a: Condition, b: Condition | null): Condition {
  if (!b) return a;
  const values = { ...a.ExpressionAttributeValues, ...b.ExpressionAttributeValues };
  return {
    ConditionExpression: `${a.ConditionExpression} AND ${b.ConditionExpression}`,
    ExpressionAttributeNames: { ...a.ExpressionAttributeNames, ...b.ExpressionAttributeNames },
    ...(Object.keys(values).length > 0 ? { ExpressionAttributeValues: values } : {}),
  };
}

/**
 * `guarded` for a transaction that creates a row of `bucket`: the bucket's check goes last, and its
 * failure is thrown as the bucket's refusal (404 gone, 409 being deleted).
 */
async function guardedCreate(db: Db, projectId: string, bucket: string, items: TransactItem[]): Promise<'done' | 'changed'> {
  try {
    await db.doc.send(new TransactWriteCommand({ TransactItems: [...items, bucketOpenCheck(db, projectId, bucket)] }));
    return 'done';
  } catch (err) {
    if (isConditionFailure(err)) {
      const reasons = cancellationReasons(err);
      if (reasons[items.length] === 'ConditionalCheckFailed') throw await bucketRefusal(db, projectId, bucket);
      if (reasons[0] === 'ConditionalCheckFailed' || reasons.includes('TransactionConflict')) return 'changed';
    }
    throw err;
  }
}

/**
 * Flips the row of `next.bucket/next.key` to `next` (a new blob, or a new row) if it is still what
 * the writer read (`prev`) and `precondition` holds of it, writing `receipt` in the same
 * transaction. False: the row changed meanwhile; re-read and decide again. Creating the row needs
 * its bucket open (404 when it is gone, 409 while it is being deleted).
 */
export async function commitObject(
  db: Db,
  next: ObjectRecord,
  prev: ObjectRecord | null,
  receipt: Receipt,
  precondition?: PutPrecondition,
): Promise<boolean> {
  const put: TransactItem = { Put: { TableName: db.table, Item: await itemOf(next), ...bothOf(unchangedSince(prev), preconditionOf(precondition)) } };
  if (prev) return guarded(db, [put, receiptPut(db, receipt)]);
  return (await guardedCreate(db, next.project, next.bucket, [put, receiptPut(db, receipt)])) === 'done';
}

/**
 * Removes the row `prev` if it is still what the caller read, with `receipt`. False: it changed.
 * With `recordBlob` (a bucket deletion), the row's blob is written down as a blob-deletion record in
 * the same transaction, for the caller to forget once the blob is gone.
 */
export async function removeObject(db: Db, prev: ObjectRecord, receipt: Receipt, { recordBlob = false }: { recordBlob?: boolean } = {}): Promise<boolean> {
  const { pk, sk } = await objectKeyOf(prev.project, prev.bucket, prev.key);
  const items: TransactItem[] = [{ Delete: { TableName: db.table, Key: { pk, sk }, ...unchangedSince(prev) } }, receiptPut(db, receipt)];
  if (recordBlob && prev.blob !== null) {
    const record: BlobDeletion = { project: prev.project, bucket: prev.bucket, blob: prev.blob, backend: prev.backend };
    items.push({ Put: { TableName: db.table, Item: { ...blobDeletionKey(prev.project, prev.bucket, prev.blob), type: 'blob-deletion', ...record, at: receipt.at } } });
  }
  return guarded(db, items);
}
