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
 */
import { BatchGetCommand, GetCommand, PutCommand, QueryCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import type { TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import type { BlobBackend } from '../blobs/store.ts';
import { invalidCursor } from '../cursors.ts';
import { errors } from '../errors.ts';
import type { Db } from './client.ts';
import { cancellationReasons, isConditionFailure } from './client.ts';
import type { Page } from './pagination.ts';
import { decodeCursor, encodeCursor, queryPage, tableKeyOf } from './pagination.ts';
import { toRecord as toProject, type ProjectRecord } from './projects.ts';
import { receiptPut, type Receipt } from './receipts.ts';
import { compareKeys, objectKeyOf, objectPrefix } from './catalog-keys.ts';
import { keys } from './table.ts';

/** A bucket (contract "Bucket record"). */
export interface BucketRecord {
  project: string;
  name: string;
  created_at: string;
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
  return { project: item.project, name: item.name, created_at: item.created_at };
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
  const projectKey = keys.project(projectId);
  const bucketKey = bucket !== null ? keys.bucket(projectId, bucket) : null;
  const objectKey = bucket !== null && key !== null ? await objectKeyOf(projectId, bucket, key) : null;
  const wanted = [projectKey, bucketKey, objectKey && { pk: objectKey.pk, sk: objectKey.sk }].filter((k) => k !== null);
  const found = new Map<string, Record<string, any>>();
  const id = (k: { pk: unknown; sk: unknown }) => `${String(k.pk)}\u0000${String(k.sk)}`;
  let pending: Record<string, unknown>[] = wanted;
  for (let attempt = 0; pending.length > 0; attempt++) {
    // Keys DynamoDB left unprocessed (throttling) are asked again, with a short growing pause.
    if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(200, 10 * 2 ** attempt)));
    if (attempt >= 8) throw new Error('DynamoDB left keys of a batched read unprocessed 8 times');
    const out = await db.doc.send(new BatchGetCommand({ RequestItems: { [db.table]: { Keys: pending, ConsistentRead: true } } }));
    for (const item of out.Responses?.[db.table] ?? []) found.set(id(item as { pk: unknown; sk: unknown }), item);
    pending = out.UnprocessedKeys?.[db.table]?.Keys ?? [];
  }
  const projectItem = found.get(id(projectKey));
  const bucketItem = bucketKey ? found.get(id(bucketKey)) : undefined;
  const objectItem = objectKey ? found.get(id(objectKey)) : undefined;
  return {
    project: projectItem ? toProject(projectItem) : null,
    bucket: bucketItem ? toBucket(bucketItem) : null,
    // The key is compared too: a sort key from a hash must never answer for another key.
    object: objectItem && objectItem.key === key ? toObject(objectItem) : null,
  };
}

/**
 * Reserves a pending row (upload ticket) unless a row exists. Answers the row as it now stands,
 * and whether this call created it; an existing row, pending or stored, is left untouched.
 */
export async function reserveObject(db: Db, pending: ObjectRecord): Promise<{ record: ObjectRecord; created: boolean }> {
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      await db.doc.send(new PutCommand({ TableName: db.table, Item: await itemOf(pending), ConditionExpression: 'attribute_not_exists(pk)' }));
      return { record: pending, created: true };
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
    }
    const existing = await getObject(db, pending.project, pending.bucket, pending.key);
    if (existing) return { record: existing, created: false };
  }
  throw errors.conflict(`object ${pending.bucket}/${pending.key} is changing concurrently, retry`);
}

type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** The condition that `prev` (what the writer read) still stands. */
function unchangedSince(
  prev: ObjectRecord | null,
): Pick<NonNullable<TransactItem['Put']>, 'ConditionExpression' | 'ExpressionAttributeNames' | 'ExpressionAttributeValues'> {
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
 * Flips the row of `next.bucket/next.key` to `next` (a new blob, or a new row) if it is still what
 * the writer read (`prev`), writing `receipt` in the same transaction. False: the row changed
 * meanwhile; re-read and decide again.
 */
export async function commitObject(db: Db, next: ObjectRecord, prev: ObjectRecord | null, receipt: Receipt): Promise<boolean> {
  return guarded(db, [{ Put: { TableName: db.table, Item: await itemOf(next), ...unchangedSince(prev) } }, receiptPut(db, receipt)]);
}

/** Removes the row `prev` if it is still what the caller read, with `receipt`. False: it changed. */
export async function removeObject(db: Db, prev: ObjectRecord, receipt: Receipt): Promise<boolean> {
  const { pk, sk } = await objectKeyOf(prev.project, prev.bucket, prev.key);
  return guarded(db, [{ Delete: { TableName: db.table, Key: { pk, sk }, ...unchangedSince(prev) } }, receiptPut(db, receipt)]);
}

interface Listed {
  record: ObjectRecord;
  sk: string;
  grp: string | null;
}

function toListed(item: Record<string, any>): Listed {
  return { record: toObject(item), sk: item.sk, grp: typeof item.grp === 'string' ? item.grp : null };
}

/** Every row of one group of long keys, in key order. */
async function groupMembers(db: Db, pk: string, grp: string): Promise<Listed[]> {
  const members: Listed[] = [];
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
    for (const item of out.Items ?? []) members.push(toListed(item));
    start = out.LastEvaluatedKey;
  } while (start);
  return members.sort((a, b) => compareKeys(a.record.key, b.record.key));
}

/** Past every member of a group: members are `grp` + hex, and `~` sorts after every hex digit. */
const AFTER_GROUP = '~';

/**
 * Lists the rows of a bucket in key order (pending rows included), `limit` at a time. A cursor
 * names the last row answered: its sort key, and for a row of a long-key group also its key.
 */
export async function listObjects(db: Db, projectId: string, bucket: string, limit: number, cursor?: string): Promise<Page<ObjectRecord>> {
  const { pk } = keys.objectsOf(projectId);
  const prefix = objectPrefix(bucket);
  const out: Listed[] = [];
  const want = limit + 1; // one more than the page tells whether another page exists
  let start: string | undefined;

  const resume = decodeCursor(cursor, ['pk', pk]);
  if (resume) {
    const sk = resume.sk;
    if (typeof sk !== 'string' || !sk.startsWith(prefix)) throw invalidCursor();
    if (typeof resume.k === 'string') {
      const after = resume.k;
      for (const m of await groupMembers(db, pk, sk)) if (compareKeys(m.record.key, after) > 0) out.push(m);
      start = sk + AFTER_GROUP;
    } else {
      start = sk;
    }
  }

  while (out.length < want) {
    const page = await db.doc.send(
      new QueryCommand({
        TableName: db.table,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': pk, ':prefix': prefix },
        ...(start !== undefined ? { ExclusiveStartKey: { pk, sk: start } } : {}),
        Limit: Math.min(1000, want - out.length),
        ConsistentRead: true,
      }),
    );
    const items = page.Items ?? [];
    let jumped = false;
    for (const item of items) {
      const listed = toListed(item);
      if (listed.grp !== null) {
        // A group sorts by hash in the table: read all of it and put it in key order.
        out.push(...(await groupMembers(db, pk, listed.grp)));
        start = listed.grp + AFTER_GROUP;
        jumped = true;
        break;
      }
      out.push(listed);
      start = listed.sk;
      if (out.length >= want) break;
    }
    if (jumped) continue;
    if (!page.LastEvaluatedKey) break;
    if (items.length === 0) start = String(page.LastEvaluatedKey.sk);
  }

  const rows = out.slice(0, limit);
  const last = rows[rows.length - 1];
  let nextCursor: string | null = null;
  if (out.length > limit && last) {
    nextCursor = encodeCursor(last.grp !== null ? { pk, sk: last.grp, k: last.record.key } : { pk, sk: last.sk });
  }
  return { items: rows.map((r) => r.record), nextCursor };
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
