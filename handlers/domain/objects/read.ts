/**
 * Reading an object's bytes: conditionals and ranges (RFC 9110 §13, §14; conditions.ts), by the
 * owner's session or a signed URL, and a row followed when a replace deleted the blob just read
 * from it (docs/storage.md "Nothing lost").
 */
import type { BlobBytes, ByteRange } from '../../../shared/blobs/store.ts';
import { getBucket, getObject, type ObjectRecord } from '../../../shared/db/storage.ts';
import { errors } from '../../../shared/errors.ts';
import type { Deps } from '../../context.ts';
import { storeFor } from './blobs.ts';
import { accessWith, notFoundObject, type ObjectAccess } from './catalog.ts';
import { notModified, rangeApplies } from './conditions.ts';

/** A GET or HEAD of `bucket/key`, as the domain needs it. */
export interface ReadInput {
  requestId: string;
  access: ObjectAccess;
  projectId: string;
  bucket: string;
  key: string;
  /** False for HEAD: the answer is decided, no byte is read. */
  withBody: boolean;
  ifNoneMatch: string | null;
  ifModifiedSince: string | null;
  range: string | null;
  ifRange: string | null;
  signal: AbortSignal;
}

/**
 * What a read answers: `not-modified` (304), `unsatisfiable` (the range lies past the end), or the
 * bytes (`range` null: the whole object; `bytes` null for a HEAD).
 */
export type ReadResult =
  | { kind: 'not-modified'; row: ObjectRecord }
  | { kind: 'unsatisfiable'; row: ObjectRecord }
  | { kind: 'bytes'; row: ObjectRecord; range: ByteRange | null; bytes: BlobBytes | null };

/**
 * Resolves a `Range` header against `size`: a range, 'unsatisfiable', or null to answer the whole
 * object (no header, another unit, several ranges, or a malformed one: RFC 9110 lets a server
 * ignore those).
 */
export function resolveRange(header: string | null, size: number): ByteRange | 'unsatisfiable' | null {
  if (header === null) return null;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!m) return null;
  const [, first, last] = m as unknown as [string, string, string];
  if (first === '' && last === '') return null;
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  if (last !== '' && Number(last) < start) return null;
  if (start >= size) return 'unsatisfiable';
  return { start, end };
}

/** Reads `bucket/key` of the caller's project (project, bucket and row in one round trip). */
export async function readObject(deps: Deps, input: ReadInput): Promise<ReadResult> {
  const { requestId, access, projectId, bucket, key } = input;
  const { project, bucket: bucketRecord, object: first } = await accessWith(deps, access, projectId, bucket, key);
  let row = first;
  // A replace may delete the blob just read from the row: re-read the row and follow it.
  for (let attempt = 1; ; attempt++) {
    if (!row) {
      // The bucket as read with the row first; a re-read row that vanished asks again.
      if (attempt === 1 ? !bucketRecord : !(await getBucket(deps.db, project.id, bucket))) throw errors.notFound(`bucket ${bucket} not found`);
      throw notFoundObject(bucket, key);
    }
    if (row.state !== 'stored' || row.blob === null) throw notFoundObject(bucket, key, true);
    if (notModified(input.ifNoneMatch, input.ifModifiedSince, row)) return { kind: 'not-modified', row };
    // A Range whose If-Range no longer holds answers the whole object (RFC 9110 §13.1.5).
    const range = rangeApplies(input.ifRange, row) ? resolveRange(input.range, row.size) : null;
    if (range === 'unsatisfiable') return { kind: 'unsatisfiable', row };
    if (!input.withBody) return { kind: 'bytes', row, range, bytes: null };
    const store = await storeFor(deps, requestId, project, row.backend);
    let bytes: BlobBytes | null;
    if (row.size === 0) bytes = { body: new ReadableStream({ start: (c) => c.close() }), length: 0 };
    else bytes = await store.get(project.id, row.blob, range ?? undefined, input.signal);
    if (bytes) return { kind: 'bytes', row, range, bytes };
    const again = await getObject(deps.db, project.id, bucket, key);
    if (attempt >= 3 || (again && again.blob === row.blob)) {
      throw errors.upstream(`the ${row.backend} blob store has no bytes for object ${bucket}/${key}`);
    }
    row = again;
  }
}
