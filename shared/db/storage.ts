/**
 * Repository: buckets and the object catalog (the interface contract "Bucket record", "Object
 * catalog row", "Object states"; docs/storage.md "Catalog layout in DynamoDB").
 *
 * Both live in the project's partition `PRJ#<prj>`: buckets under `BKT#<bucket>`, catalog rows under
 * `OBJ#<bucket>#<key part>`, the key part built by shared/db/catalog-keys.ts.
 *
 * ## Writes
 * A row changes only by a conditional write on what the writer read (docs/storage.md "Nothing
 * lost"): absent (`attribute_not_exists`), the pending row of a ticket (no blob, same id), or the
 * blob it pointed at. A failed condition is reported as a conflict, and the caller re-reads and
 * tries again. Each change carries its receipt in the same TransactWriteItems (the interface contract
 * "Receipts", docs/interface.md).
 *
 * A row is created only while its bucket exists and is not being deleted: the creating transaction
 * checks the bucket item too (docs/storage.md "Deleting a bucket"). A replace needs no such check: a
 * bucket deletion removes rows by the same conditional writes, so whichever comes second re-reads.
 * Rows a bucket deletion removed leave a blob-deletion record (`BLOBDEL#<bucket>#<blob>`) in the same
 * transaction, until their blob is gone: every blob is always named by a row or by such a record.
 */
import { DeleteCommand, GetCommand, PutCommand, QueryCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import type { BlobBackend } from '../blobs/store.ts';
import { invalidCursor } from '../cursors.ts';
import { errors, type ServiceError } from '../errors.ts';
import type { Db, ItemsRead, TableKey } from './client.ts';
import { batchGetItems, cancellationReasons, isConditionFailure } from './client.ts';
import type { Page } from './pagination.ts';
import { decodeCursor, encodeCursor, queryPage, tableKeyOf } from './pagination.ts';
import { toRecord as toProject, type ProjectRecord } from './projects.ts';
import { receiptPut, type Receipt } from './receipts.ts';
import {
  AFTER_GROUP,
  blobDeletionKey,
  blobDeletionPrefix,
  compareKeys,
  keyPartCeiling,
  keyPartFloor,
  objectKeyOf,
  objectPrefix,
  prefixSuccessor,
} from './catalog-keys.ts';
import { keys } from './table.ts';

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

// ---------------------------------------------------------------------------------------------
// Buckets

function toBucket(item: Record<string, any>): BucketRecord {
  const bucket: BucketRecord = { project: item.project, name: item.name, created_at: item.created_at };
  if (typeof item.deleting === 'string') bucket.deleting = item.deleting;
  return bucket;
}

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
  const pk = keys.project(projectId).pk;
  const page = await queryPage(
    db,
    {
      TableName: db.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
      ExpressionAttributeValues: { ':pk': pk, ':prefix': 'BKT#' },
      ConsistentRead: true,
    },
    { limit, cursor, partition: ['pk', pk], keyOf: tableKeyOf },
  );
  return { items: page.items.map(toBucket), nextCursor: page.nextCursor };
}

/** The condition a row's creation puts on its bucket: it exists and is not being deleted. */
const BUCKET_OPEN = {
  ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(#deleting)',
  ExpressionAttributeNames: { '#deleting': 'deleting' },
} as const;

/** The transaction item checking that `bucket` of `projectId` takes new rows. */
function bucketOpenCheck(db: Db, projectId: string, bucket: string): TransactItem {
  return { ConditionCheck: { TableName: db.table, Key: keys.bucket(projectId, bucket), ...BUCKET_OPEN } };
}

/** Why a row could not be created in `bucket`: it is gone (404) or being deleted (409). */
async function bucketRefusal(db: Db, projectId: string, bucket: string): Promise<ServiceError> {
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

/** A blob whose row a bucket deletion removed, not yet deleted from its store. */
export interface BlobDeletion {
  project: string;
  bucket: string;
  blob: string;
  backend: BlobBackend;
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
      ExpressionAttributeValues: { ':pk': keys.objectsOf(projectId).pk, ':prefix': bucket === null ? 'BLOBDEL#' : blobDeletionPrefix(bucket) },
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

// ---------------------------------------------------------------------------------------------
// Catalog rows

function toObject(item: Record<string, any>): ObjectRecord {
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

async function itemOf(r: ObjectRecord): Promise<Record<string, unknown>> {
  const { pk, sk, grp } = await objectKeyOf(r.project, r.bucket, r.key);
  const { blob, ...row } = r;
  return { pk, sk, type: 'object', ...row, ...(blob !== null ? { blob } : {}), ...(grp !== null ? { grp } : {}) };
}

/** Reads the row of `bucket/key`, or null. */
export async function getObject(db: Db, projectId: string, bucket: string, key: string): Promise<ObjectRecord | null> {
  const { pk, sk } = await objectKeyOf(projectId, bucket, key);
  const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: { pk, sk }, ConsistentRead: true }));
  // The key is compared too: a sort key from a hash must never answer for another key.
  return out.Item && out.Item.key === key ? toObject(out.Item) : null;
}

/**
 * Reads a project, one of its buckets (when `bucket` is given) and the row of `bucket/key` (when
 * `key` is given too) in one round trip (a consistent BatchGetItem): the byte routes need them all
 * at once, and one call costs about what one GetItem does where three parallel ones cost twice
 * that. Ownership is the caller's to judge before anything else is used.
 */
export async function getProjectBucketObject(
  db: Db,
  projectId: string,
  bucket: string | null,
  key: string | null,
): Promise<{ project: ProjectRecord | null; bucket: BucketRecord | null; object: ObjectRecord | null }> {
  const catalog = await catalogKeys(projectId, bucket, key);
  return catalog.read(await batchGetItems(db, catalog.keys));
}

/** What a batched read of a project, a bucket and a row reads (`keys`) and finds in what it read (`read`). */
export interface CatalogRead {
  keys: TableKey[];
  read(items: ItemsRead): { project: ProjectRecord | null; bucket: BucketRecord | null; object: ObjectRecord | null };
}

/**
 * The items of `getProjectBucketObject`, for a caller that joins them to a read of its own (the
 * session's standing, handlers/domain/sessions.ts): one round trip for all.
 */
export async function catalogKeys(projectId: string, bucket: string | null, key: string | null): Promise<CatalogRead> {
  const projectKey = keys.project(projectId);
  const bucketKey = bucket !== null ? keys.bucket(projectId, bucket) : null;
  const objectKey = bucket !== null && key !== null ? await objectKeyOf(projectId, bucket, key) : null;
  const rowKey = objectKey && { pk: objectKey.pk, sk: objectKey.sk };
  return {
    keys: [projectKey, bucketKey, rowKey].filter((k) => k !== null),
    read(items) {
      const projectItem = items.get(projectKey);
      const bucketItem = bucketKey ? items.get(bucketKey) : undefined;
      const objectItem = rowKey ? items.get(rowKey) : undefined;
      return {
        project: projectItem ? toProject(projectItem) : null,
        bucket: bucketItem ? toBucket(bucketItem) : null,
        // The key is compared too: a sort key from a hash must never answer for another key.
        object: objectItem && objectItem.key === key ? toObject(objectItem) : null,
      };
    },
  };
}

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

type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

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

/** Runs a transaction whose first item is the guarded catalog change: false when that guard failed. */
async function guarded(db: Db, items: TransactItem[]): Promise<boolean> {
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

/** Every row of one group of long keys, in key order. */
async function groupMembers(db: Db, pk: string, grp: string): Promise<ObjectRecord[]> {
  const members: ObjectRecord[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await db.doc.send(
      new QueryCommand({
        TableName: db.table,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :grp)',
        ExpressionAttributeValues: { ':pk': pk, ':grp': grp },
        ExclusiveStartKey: start,
        ConsistentRead: true,
      }),
    );
    for (const item of out.Items ?? []) members.push(toObject(item));
    start = out.LastEvaluatedKey;
  } while (start);
  return members.sort((a, b) => compareKeys(a.key, b.key));
}

/** An entry of a bucket's listing: a row, or (with a delimiter) a common prefix standing for every key under it. */
export type CatalogEntry = { kind: 'object'; record: ObjectRecord } | { kind: 'prefix'; prefix: string };

/** What a listing of one bucket asks for. */
export interface CatalogQuery {
  limit: number;
  /** The repository's cursor (shared/db/pagination.ts) of the page before. */
  cursor?: string | undefined;
  /** Only keys that start with it (empty or absent: every key). */
  prefix?: string | undefined;
  /** Keys that hold it after the prefix are rolled up into one common prefix each (S3's `delimiter`). */
  delimiter?: string | undefined;
}

/** Where a listing resumes: past a key, or past every key under a common prefix. */
type Position = { key: string } | { under: string };

/** True when `key` comes after `after` in the listing. */
function isPast(key: string, after: Position | null): boolean {
  if (after === null) return true;
  if ('key' in after) return compareKeys(key, after.key) > 0;
  return compareKeys(key, after.under) > 0 && !key.startsWith(after.under);
}

/** The smallest key that may come after `after` (null: none can). */
function firstPast(after: Position): string | null {
  return 'key' in after ? `${after.key}\u0000` : prefixSuccessor(after.under);
}

/**
 * The position a cursor names: `k` (past that key) or `u` (past every key under that common
 * prefix). Cursors of the earlier format name a sort key (`sk`, with `k` for a long key) and still open.
 */
function positionOf(cursor: string | undefined, pk: string, skPrefix: string): Position | null {
  const resume = decodeCursor(cursor, ['pk', pk]);
  if (!resume) return null;
  if (typeof resume.u === 'string') return { under: resume.u };
  if (typeof resume.k === 'string') return { key: resume.k };
  if (typeof resume.sk === 'string' && resume.sk.startsWith(skPrefix)) return { key: resume.sk.slice(skPrefix.length) };
  throw invalidCursor();
}

/**
 * Lists a bucket in key order (pending rows included), `limit` entries at a time: the rows whose key
 * starts with `prefix`, and with a `delimiter`, each key that holds it after the prefix rolled up
 * into its common prefix (the key up to and including the delimiter), once, where it sorts (S3's
 * ListObjectsV2). A cursor names the last entry answered.
 *
 * The scan reads sort keys between two bounds (shared/db/catalog-keys.ts `keyPartFloor` and
 * `keyPartCeiling`: an over-wide range, never a narrow one) and judges every key itself; a group of
 * long keys is read whole and taken in key order. Past a common prefix it seeks beyond every key
 * under it rather than reading them.
 */
export async function listCatalog(db: Db, projectId: string, bucket: string, q: CatalogQuery): Promise<Page<CatalogEntry>> {
  const { pk } = keys.objectsOf(projectId);
  const skPrefix = objectPrefix(bucket);
  const prefix = q.prefix ?? '';
  const delimiter = q.delimiter ? q.delimiter : null;
  const want = q.limit + 1; // one more than the page tells whether another page exists
  const out: CatalogEntry[] = [];
  let after = positionOf(q.cursor, pk, skPrefix);

  // Never past the keys under `prefix`, nor out of the bucket (`$` follows the `#` ending skPrefix).
  const end = prefixSuccessor(prefix);
  const hiSk = end === null ? `${skPrefix.slice(0, -1)}$` : skPrefix + (await keyPartCeiling(end));
  let from: string | null = after === null ? prefix : firstPast(after);
  if (from !== null && compareKeys(from, prefix) < 0) from = prefix;

  scan: while (from !== null && out.length < want) {
    const loSk = skPrefix + (await keyPartFloor(from));
    if (compareKeys(loSk, hiSk) > 0) break;
    let start: Record<string, unknown> | undefined;
    do {
      const page = await db.doc.send(
        new QueryCommand({
          TableName: db.table,
          KeyConditionExpression: 'pk = :pk AND sk BETWEEN :lo AND :hi',
          ExpressionAttributeValues: { ':pk': pk, ':lo': loSk, ':hi': hiSk },
          ExclusiveStartKey: start,
          Limit: Math.min(1000, want - out.length),
          ConsistentRead: true,
        }),
      );
      start = page.LastEvaluatedKey;
      for (const item of page.Items ?? []) {
        const grp = typeof item.grp === 'string' ? item.grp : null;
        // A group sorts by hash in the table: read all of it and take it in key order.
        const rows = grp === null ? [toObject(item)] : await groupMembers(db, pk, grp);
        for (const row of rows) {
          if (!row.key.startsWith(prefix) || !isPast(row.key, after)) continue;
          const cut = delimiter === null ? -1 : row.key.indexOf(delimiter, prefix.length);
          if (cut >= 0) {
            const under = row.key.slice(0, cut + delimiter!.length);
            out.push({ kind: 'prefix', prefix: under });
            after = { under };
          } else {
            out.push({ kind: 'object', record: row });
            after = { key: row.key };
          }
          if (out.length >= want) break scan;
          // Every other key under the prefix just answered is skipped: seek past them.
          if (cut >= 0 && grp === null) {
            from = firstPast(after);
            continue scan;
          }
        }
        if (grp !== null) {
          const past = grp + AFTER_GROUP;
          if (after !== null && 'under' in after) {
            // Seek past the keys under the prefix just answered, when they reach beyond the group
            // (seeking to a point inside it would read the group again, and again).
            const next = firstPast(after);
            if (next === null) break scan;
            if (compareKeys(skPrefix + (await keyPartFloor(next)), past) > 0) {
              from = next;
              continue scan;
            }
          }
          // Resume past the group; a group ends before the bound when one of its keys is in range.
          start = compareKeys(past, hiSk) < 0 ? { pk, sk: past } : undefined;
          break;
        }
      }
    } while (start);
    break;
  }

  const page = out.slice(0, q.limit);
  const last = page[page.length - 1];
  let nextCursor: string | null = null;
  if (out.length > q.limit && last) nextCursor = encodeCursor(last.kind === 'object' ? { pk, k: last.record.key } : { pk, u: last.prefix });
  return { items: page, nextCursor };
}

/** Lists the rows of a bucket in key order (pending rows included), `limit` at a time (`listCatalog` without prefix). */
export async function listObjects(db: Db, projectId: string, bucket: string, limit: number, cursor?: string): Promise<Page<ObjectRecord>> {
  const page = await listCatalog(db, projectId, bucket, { limit, cursor });
  return { items: page.items.flatMap((e) => (e.kind === 'object' ? [e.record] : [])), nextCursor: page.nextCursor };
}

/**
 * Every blob name the project's catalog rows point at, pending rows having none (read consistently,
 * `blob` alone). The host agent's sweep of fs blobs no row references uses it
 * (host-agent/blobs/sweep.ts); blob names are unique per write, so a name is referenced or not
 * whatever backend its row names.
 */
export async function referencedBlobs(db: Db, projectId: string): Promise<Set<string>> {
  const { pk } = keys.objectsOf(projectId);
  const names = new Set<string>();
  let start: Record<string, unknown> | undefined;
  do {
    const out = await db.doc.send(
      new QueryCommand({
        TableName: db.table,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': pk, ':prefix': 'OBJ#' },
        // `blob` is a DynamoDB reserved word.
        ProjectionExpression: '#blob',
        ExpressionAttributeNames: { '#blob': 'blob' },
        ExclusiveStartKey: start,
        ConsistentRead: true,
      }),
    );
    for (const item of out.Items ?? []) if (typeof item.blob === 'string') names.add(item.blob);
    start = out.LastEvaluatedKey;
  } while (start);
  return names;
}
