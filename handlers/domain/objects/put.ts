/**
 * A PUT of an object's bytes (docs/storage.md "Nothing lost"): every PUT writes a new immutable
 * blob, then flips the catalog row to it with a conditional write (re-reading and retrying when
 * another writer got there first), and only then deletes the blob the row used to point at, after
 * answering. A failure before the flip removes the new blob; a crash leaves at most an unreferenced
 * blob, never a row without its bytes. A conditional PUT (`If-Match`, `If-None-Match`; conditions.ts)
 * is judged on the row the flip is conditioned on, so no other write can come between the check and
 * the flip; a failed precondition is 409 `conflict` (docs/storage.md "Conditional requests").
 */
import type { SessionClaims } from '../../../shared/auth.ts';
import { blobName, newWriteId } from '../../../shared/blobs/names.ts';
import type { BlobBackend, BlobStore, BlobWritten } from '../../../shared/blobs/store.ts';
import type { ProjectRecord } from '../../../shared/db/projects.ts';
import { newReceipt } from '../../../shared/db/receipts.ts';
import { commitObject, getObject, type ObjectRecord, type PutPrecondition } from '../../../shared/db/storage.ts';
import { errors } from '../../../shared/errors.ts';
import { newId } from '../../../shared/ids.ts';
import { DEFAULT_CONTENT_TYPE } from '../../../shared/schemas/storage.ts';
import { nowIso } from '../../../shared/time.ts';
import type { Deps } from '../../context.ts';
import { discardBlob, earlyStore, storeFor } from './blobs.ts';
import { FLIP_ATTEMPTS, backOff, closedBucket, ownedWith } from './catalog.ts';
import { isConditional, preconditionFailure } from './conditions.ts';

/** A PUT of `bucket/key`, its size limit already checked against the declared length. */
export interface PutInput {
  requestId: string;
  /** The session's token, verified by its signature: whether it still stands is judged with the catalog reads. */
  session: SessionClaims;
  projectId: string;
  bucket: string;
  key: string;
  /** The validated `Content-Type`, or null when the request names none. */
  contentType: string | null;
  /** The declared `Content-Length`, or null when the body streams without one. */
  length: number | null;
  /** `If-Match` and `If-None-Match`, parsed (conditions.ts `putPrecondition`). */
  precondition: PutPrecondition;
  body: ReadableStream<Uint8Array> | null;
  signal: AbortSignal;
  /** Runs `task` once the answer has gone out (the replaced blob's deletion). */
  afterAnswer(task: Promise<void>): void;
}

/**
 * What a PUT answers: the stored row (`replaced` when it replaced stored bytes), or a refusal met
 * before the bytes were written (`refused`: the body may still be unread, for the caller to drain).
 */
export type PutResult = { kind: 'stored'; row: ObjectRecord; replaced: boolean } | { kind: 'refused'; error: unknown };

/** Writes the bytes of `bucket/key` and flips its row to them. */
export async function putObject(deps: Deps, input: PutInput): Promise<PutResult> {
  let prepared: Awaited<ReturnType<typeof preparePut>>;
  try {
    prepared = await preparePut(deps, input);
  } catch (error) {
    return { kind: 'refused', error };
  }
  const { requestId, bucket, key, contentType, precondition } = input;
  const accountId = input.session.accountId;
  const { project, backend, current, store } = prepared;

  // 1. The bytes, into a blob nobody references yet (already written when the write could start
  // beside the catalog reads).
  const { name, written } = prepared.blob ?? (await writeBlob(deps, store, input, contentType ?? current?.content_type));

  // 2. The conditional flip of the row to that blob, with its receipt.
  return { kind: 'stored', ...(await flipRow(deps, { requestId, accountId, project, backend, store, bucket, key, contentType, precondition, current, name, written, afterAnswer: input.afterAnswer })) };
}

/** What `flipRow` flips a row to, and from what it read. */
export interface Flip {
  requestId: string;
  accountId: string;
  project: ProjectRecord;
  backend: BlobBackend;
  store: BlobStore;
  bucket: string;
  key: string;
  contentType: string | null;
  precondition: PutPrecondition;
  /** The row as read before the bytes were written. */
  current: ObjectRecord | null;
  /** The new blob and what its store said of it. */
  name: string;
  written: BlobWritten;
  afterAnswer(task: Promise<void>): void;
}

/**
 * Flips the row of `bucket/key` to a blob just written (a PUT's, a completed resumable upload's,
 * docs/storage.md "Resumable uploads"), with its receipt, retrying over other writers; removes the
 * blob when it cannot, and hands the replaced blob's deletion to `afterAnswer`.
 */
export async function flipRow(deps: Deps, flip: Flip): Promise<{ row: ObjectRecord; replaced: boolean }> {
  const { requestId, accountId, project, backend, store, bucket, key, contentType, precondition, name, written } = flip;
  let prev = flip.current;
  for (let attempt = 1; ; attempt++) {
    // Judged again on every row read: the flip below is conditioned on exactly this row.
    const failed = preconditionFailure(precondition, prev, bucket, key);
    if (failed !== null) {
      await discardBlob(deps, requestId, project, backend, name, store);
      throw errors.conflict(failed);
    }
    const at = nowIso(deps.now());
    const next: ObjectRecord = {
      id: prev?.id ?? newId('obj'),
      project: project.id,
      bucket,
      key,
      size: written.size,
      etag: written.etag,
      // The header decides; a ticket's content type stands in when the PUT names none.
      content_type: contentType ?? (prev?.state === 'pending' ? prev.content_type : DEFAULT_CONTENT_TYPE),
      backend,
      state: 'stored',
      created_at: prev?.created_at ?? at,
      updated_at: at,
      blob: name,
    };
    const receipt = newReceipt({ project: project.id, op: 'object.put', target: `${bucket}/${key}`, actor: accountId, request_id: requestId, at });
    let flipped: boolean;
    try {
      flipped = await commitObject(deps.db, next, prev, receipt, precondition);
    } catch (err) {
      await discardBlob(deps, requestId, project, backend, name, store);
      throw err;
    }
    if (flipped) {
      // 3. Only now is the previous blob unreferenced: it is deleted after the answer, off the
      // client's wait. Should that never happen (a crash, a store that is down), what is left is an
      // unreferenced blob, never a row without bytes.
      if (prev?.blob) flip.afterAnswer(discardBlob(deps, requestId, project, prev.backend, prev.blob, prev.backend === backend ? store : undefined));
      return { row: next, replaced: prev?.state === 'stored' };
    }
    if (attempt >= FLIP_ATTEMPTS) {
      await discardBlob(deps, requestId, project, backend, name, store);
      throw errors.conflict(`object ${bucket}/${key} is being written concurrently, retry`);
    }
    // Another writer changed the row since it was read: read again and flip over what it left.
    await backOff(attempt);
    prev = await getObject(deps.db, project.id, bucket, key);
  }
}

/** Writes the PUT's body into a new blob of `store`; answers its name and what the store says of it. */
async function writeBlob(
  deps: Deps,
  store: BlobStore,
  input: PutInput,
  contentType: string | null | undefined,
): Promise<{ name: string; written: BlobWritten }> {
  const { projectId, bucket, key } = input;
  const name = await blobName(projectId, bucket, key, newWriteId());
  const written = await store.put(projectId, name, {
    body: input.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() }),
    length: input.length,
    maxBytes: deps.settings.SVCD_STORAGE_MAX_BYTES,
    contentType: contentType ?? DEFAULT_CONTENT_TYPE,
    signal: input.signal,
  });
  return { name, written };
}

/**
 * Everything a PUT of bytes reads before the flip. Any failure before the body is touched leaves it
 * unread, for the caller to drain while it answers.
 *
 * The catalog reads (the session's standing, project, bucket, row) cost one DynamoDB round trip.
 * When this isolate has seen the token's account own the project, and (on `fs`) knows its live
 * agent without a read, the blob is written while they are under way rather than after (`blob` in
 * the answer). Only then: a stranger's PUT never writes a byte, and learns nothing from how long its
 * 404 takes. Should the reads refuse after all (a session signed out since, a bucket that does not
 * exist), the body has been taken in whole by then, and the new blob, which nothing references, is
 * deleted before the refusal is answered.
 */
async function preparePut(
  deps: Deps,
  input: PutInput,
): Promise<{
  project: ProjectRecord;
  backend: BlobBackend;
  current: ObjectRecord | null;
  store: BlobStore;
  blob: { name: string; written: BlobWritten } | null;
}> {
  const { requestId, projectId, bucket, key } = input;
  const accountId = input.session.accountId;
  const backend = deps.settings.SVCD_BLOB_BACKEND;
  const reads = ownedWith(deps, input.session, projectId, bucket, key);

  // A conditional PUT is judged before any byte is written: it may well be refused (create-only).
  const early =
    deps.placement.ownerOf(projectId) === accountId && !isConditional(input.precondition) ? earlyStore(deps, requestId, projectId, backend) : null;
  if (!early) {
    const { project, bucket: bucketRecord, object: current } = await reads;
    const closed = closedBucket(bucketRecord, bucket);
    if (closed) throw closed;
    const failed = preconditionFailure(input.precondition, current, bucket, key);
    if (failed !== null) throw errors.conflict(failed);
    const store = await storeFor(deps, requestId, project, backend);
    return { project, backend, current, store, blob: null };
  }

  // The row is not known yet: the blob's own content type (S3 metadata, which nothing serves) is
  // the header's; the row's is decided at the flip as always.
  const writing = writeBlob(deps, early.store, input, input.contentType);
  const [read, wrote] = await Promise.allSettled([reads, writing]);
  let refusal: unknown = read.status === 'rejected' ? read.reason : closedBucket(read.value.bucket, bucket);
  // A remembered placement is wrong only after a move (docs/durability.md): then nothing is kept and the client retries.
  if (refusal === null && read.status === 'fulfilled' && early.agentId !== null && read.value.project.agent_id !== early.agentId) refusal = errors.upstream(`project ${projectId} is not on host agent ${early.agentId}, retry`);
  if (refusal !== null) {
    if (wrote.status === 'fulfilled') {
      const { name } = wrote.value;
      await early.store.delete(projectId, name).catch((err: Error) => {
        deps.log(`storage: request ${requestId}: unreferenced ${backend} blob ${projectId}/${name} left behind: ${err.message}`);
      });
    }
    throw refusal;
  }
  if (wrote.status === 'rejected') throw wrote.reason;
  const { project, object: current } = (read as PromiseFulfilledResult<Awaited<typeof reads>>).value;
  return { project, backend, current, store: early.store, blob: wrote.value };
}

