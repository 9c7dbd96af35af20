/**
 * Repository: resumable uploads (docs/storage.md "Resumable uploads"). An upload is
 * `PRJ#<prj>` / `UPL#<upload_id>` (shared/db/table.ts): what it will store (bucket, key, content
 * type, length, blob name), how far it got (`offset`, and on `s3` the multipart upload and its parts),
 * and when it expires. Every change of `offset` is conditioned on the offset its writer read, so
 * two writers never both advance it; the bytes before a recorded offset are always durable.
 */
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { BlobBackend } from '../blobs/store.ts';
import type { Db } from './client.ts';
import { isConditionFailure } from './client.ts';
import { queryEach } from './pagination.ts';
import { GSI1, keys } from './table.ts';

/** One part of an `s3` upload's multipart upload. */
export interface UploadPart {
  n: number;
  etag: string;
  size: number;
}

/** A resumable upload as stored. */
export interface UploadRecord {
  project: string;
  upload_id: string;
  bucket: string;
  key: string;
  content_type: string;
  /** `Upload-Length`. */
  length: number;
  /** Bytes received and durable. */
  offset: number;
  /** `Upload-Metadata` as the client sent it (answered back by HEAD). */
  metadata: string;
  backend: BlobBackend;
  /** The blob the completed upload becomes (shared/blobs/names.ts). */
  blob: string;
  /** The account that created it (the receipt's actor). */
  actor: string;
  created_at: string;
  /** ISO time after which the upload is gone (docs/storage.md "Resumable uploads", expiration). */
  expires_at: string;
  /** Set once the object is stored (the catalog row flipped to `blob`). */
  completed_at?: string;
  /** `s3`: the multipart upload's id, its parts so far, and the incomplete part's size (0: none). */
  multipart_id?: string;
  parts?: UploadPart[];
  tail?: number;
}

/**
 * Creates the record (a fresh id never exists already), indexed under the agent hosting its project
 * (`agentId`), whose sweep finds it there once it expires.
 */
export async function createUpload(db: Db, record: UploadRecord, agentId: string): Promise<void> {
  await db.doc.send(
    new PutCommand({
      TableName: db.table,
      Item: { ...keys.upload(record.project, record.upload_id), [GSI1.pk]: keys.uploadsOn(agentId), [GSI1.sk]: `${record.project}#${record.upload_id}`, type: 'upload', ...record },
      ConditionExpression: 'attribute_not_exists(pk)',
    }),
  );
}

/** Reads an upload, or null. */
export async function getUpload(db: Db, projectId: string, uploadId: string): Promise<UploadRecord | null> {
  const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: keys.upload(projectId, uploadId), ConsistentRead: true }));
  return out.Item ? uploadOf(out.Item) : null;
}

/** What a PATCH changes: the new offset, the expiry, and on `s3` the parts and incomplete part. */
export type UploadAdvance = Pick<UploadRecord, 'offset' | 'expires_at'> & Partial<Pick<UploadRecord, 'parts' | 'tail'>>;

/** Advances the upload from offset `from`; false when its offset is no longer `from` (or it is gone). */
export async function advanceUpload(db: Db, projectId: string, uploadId: string, from: number, next: UploadAdvance): Promise<boolean> {
  const names: Record<string, string> = { '#offset': 'offset', '#expires': 'expires_at' };
  const values: Record<string, unknown> = { ':from': from, ':offset': next.offset, ':expires': next.expires_at };
  const sets = ['#offset = :offset', '#expires = :expires'];
  if (next.parts !== undefined) {
    names['#parts'] = 'parts';
    values[':parts'] = next.parts;
    sets.push('#parts = :parts');
  }
  if (next.tail !== undefined) {
    names['#tail'] = 'tail';
    values[':tail'] = next.tail;
    sets.push('#tail = :tail');
  }
  return conditional(
    db.doc.send(
      new UpdateCommand({
        TableName: db.table,
        Key: keys.upload(projectId, uploadId),
        UpdateExpression: `SET ${sets.join(', ')}`,
        ConditionExpression: 'attribute_exists(pk) AND #offset = :from AND attribute_not_exists(completed_at)',
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      }),
    ),
  );
}

/** Marks the upload complete (its object stored); false when it already was or is gone. */
export async function completeUpload(db: Db, projectId: string, uploadId: string, at: string): Promise<boolean> {
  return conditional(
    db.doc.send(
      new UpdateCommand({
        TableName: db.table,
        Key: keys.upload(projectId, uploadId),
        UpdateExpression: 'SET completed_at = :at',
        ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(completed_at)',
        ExpressionAttributeValues: { ':at': at },
      }),
    ),
  );
}

/** Removes the record; false when it was gone already. */
export async function deleteUpload(db: Db, projectId: string, uploadId: string): Promise<boolean> {
  return conditional(
    db.doc.send(new DeleteCommand({ TableName: db.table, Key: keys.upload(projectId, uploadId), ConditionExpression: 'attribute_exists(pk)' })),
  );
}

/** The uploads of the projects `agentId` hosts (the index is eventually consistent: for the expiry sweep). */
export async function uploadsOn(db: Db, agentId: string): Promise<UploadRecord[]> {
  const found: UploadRecord[] = [];
  await queryEach(
    db,
    {
      TableName: db.table,
      IndexName: GSI1.name,
      KeyConditionExpression: '#p = :p',
      ExpressionAttributeNames: { '#p': GSI1.pk },
      ExpressionAttributeValues: { ':p': keys.uploadsOn(agentId) },
    },
    (items) => {
      for (const item of items) found.push(uploadOf(item));
    },
  );
  return found;
}

async function conditional(call: Promise<unknown>): Promise<boolean> {
  try {
    await call;
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

export function uploadOf(item: Record<string, any>): UploadRecord {
  const { pk: _pk, sk: _sk, gsi1pk: _gpk, gsi1sk: _gsk, type: _type, ...rest } = item;
  return { ...rest, length: Number(rest.length), offset: Number(rest.offset) } as UploadRecord;
}
