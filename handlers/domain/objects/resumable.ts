/**
 * Resumable uploads (docs/storage.md "Resumable uploads"; TUS 1.0.0): creating one, appending to
 * it, where it stands, terminating it. The route (handlers/routes/resumable.ts) reads and answers
 * the protocol's headers; these functions take plain values. The upload's state is its record
 * (shared/db/uploads.ts); its bytes are a ResumableBytes store's (shared/blobs/multipart.ts).
 *
 * An offset is recorded only once the bytes before it are durable, by a write conditioned on the
 * offset read: a PATCH that dies anywhere leaves the recorded offset, and the next one from it
 * overwrites whatever followed. The completion is resumable-finish.ts's.
 */
import { blobName, newWriteId } from '../../../shared/blobs/names.ts';
import { ownedProjectWith } from '../sessions.ts';
import type { ProjectRecord } from '../../../shared/db/projects.ts';
import { keys } from '../../../shared/db/table.ts';
import { advanceUpload, createUpload, uploadOf, type UploadRecord } from '../../../shared/db/uploads.ts';
import { errors } from '../../../shared/errors.ts';
import { randomHex } from '../../../shared/ids.ts';
import { nowIso } from '../../../shared/time.ts';
import type { Deps } from '../../context.ts';
import { closedBucket, ownedWith } from './catalog.ts';
import { bytesFor, dropUpload, expired, finishUpload, progressOf, targetOf, type UploadCall } from './resumable-finish.ts';

export type { UploadCall } from './resumable-finish.ts';

/** Bytes sent with a request: the body and its declared length. */
export interface UploadBody {
  body: ReadableStream<Uint8Array>;
  length: number;
  signal?: AbortSignal;
}

/** What a new upload stores (from `Upload-Length` and `Upload-Metadata`, already validated). */
export interface NewUpload {
  bucket: string;
  key: string;
  contentType: string;
  length: number;
  /** `Upload-Metadata` as sent, answered back by HEAD. */
  metadata: string;
}

/** Where an upload stands, as the protocol's headers answer it. */
export interface UploadState {
  uploadId: string;
  offset: number;
  length: number;
  metadata: string;
  expiresAt: string;
}

const stateOf = (record: UploadRecord): UploadState => ({
  uploadId: record.upload_id,
  offset: record.offset,
  length: record.length,
  metadata: record.metadata,
  expiresAt: record.expires_at,
});

const expiryFrom = (deps: Deps): string => nowIso(deps.now() + deps.settings.SVCD_RESUMABLE_EXPIRY_SECONDS * 1000);

/** Creates an upload (and appends `first` to it, or completes it when it has 0 bytes). */
export async function createResumable(deps: Deps, call: UploadCall, upload: NewUpload, first: UploadBody | null): Promise<UploadState> {
  const maxObject = deps.settings.SVCD_STORAGE_MAX_OBJECT_BYTES;
  if (upload.length > maxObject) throw errors.tooLarge(`Upload-Length: over the largest object, ${maxObject} bytes (SVCD_STORAGE_MAX_OBJECT_BYTES)`);
  const { project, bucket } = await ownedWith(deps, call.session, call.projectId, upload.bucket, null);
  const closed = closedBucket(bucket, upload.bucket);
  if (closed) throw closed;
  const backend = deps.settings.SVCD_BLOB_BACKEND;
  const record: UploadRecord = {
    project: project.id,
    upload_id: `upl_${randomHex(8)}`,
    bucket: upload.bucket,
    key: upload.key,
    content_type: upload.contentType,
    length: upload.length,
    offset: 0,
    metadata: upload.metadata,
    backend,
    blob: await blobName(project.id, upload.bucket, upload.key, newWriteId()),
    actor: call.session.accountId,
    created_at: nowIso(deps.now()),
    expires_at: expiryFrom(deps),
  };
  const bytes = await bytesFor(deps, call.requestId, project, backend);
  const { multipartId } = await bytes.begin(targetOf(record));
  if (multipartId) Object.assign(record, { multipart_id: multipartId, parts: [], tail: 0 });
  await createUpload(deps.db, record, project.agent_id);
  if (first && first.length > 0) return append(deps, call, project, record, 0, first);
  if (upload.length === 0) {
    await finishUpload(deps, call, project, record, bytes);
    return stateOf(record);
  }
  await first?.body.cancel().catch(() => {});
  return stateOf(record);
}

/** The caller's project and its upload `uploadId`, read in one round trip; 404 when either is not there, or the upload expired. */
async function ownedUpload(deps: Deps, call: UploadCall, uploadId: string): Promise<{ project: ProjectRecord; record: UploadRecord }> {
  const key = keys.upload(call.projectId, uploadId);
  const { project, items } = await ownedProjectWith(deps, call.session, call.projectId, [key]);
  const item = items.get(key);
  const gone = errors.notFound(`upload ${uploadId} not found (it may have expired, been terminated, or never existed)`);
  if (!item) throw gone;
  const record = uploadOf(item);
  if (expired(deps, record)) {
    // Its bytes go now rather than at the agent's next sweep (docs/storage.md "Resumable uploads").
    await dropUpload(deps, call.requestId, project, record).catch((err: Error) => deps.log(`storage: request ${call.requestId}: expired upload ${uploadId}: ${err.message}`));
    throw gone;
  }
  return { project, record };
}

/** HEAD: where the upload stands (finishing one a crash left complete but not yet an object). */
export async function resumableState(deps: Deps, call: UploadCall, uploadId: string): Promise<UploadState> {
  const { project, record } = await ownedUpload(deps, call, uploadId);
  if (record.offset === record.length && record.completed_at === undefined) {
    await finishUpload(deps, call, project, record, await bytesFor(deps, call.requestId, project, record.backend));
  }
  return stateOf(record);
}

/** PATCH: appends `body` at `offset`, which must be the upload's. */
export async function appendResumable(deps: Deps, call: UploadCall, uploadId: string, offset: number, body: UploadBody): Promise<UploadState> {
  const { project, record } = await ownedUpload(deps, call, uploadId);
  if (offset !== record.offset) throw errors.conflict(`Upload-Offset ${offset} is not the upload's offset, ${record.offset}`);
  return append(deps, call, project, record, offset, body);
}

async function append(deps: Deps, call: UploadCall, project: ProjectRecord, record: UploadRecord, offset: number, body: UploadBody): Promise<UploadState> {
  if (offset + body.length > record.length) throw errors.tooLarge(`body: passes the upload's Upload-Length, ${record.length} bytes (${record.length - offset} left)`);
  const bytes = await bytesFor(deps, call.requestId, project, record.backend);
  if (record.completed_at === undefined && body.length > 0) {
    const next = await bytes.append(targetOf(record), progressOf(record), body.body, body.length, body.signal);
    const advance = { offset: next.offset, expires_at: expiryFrom(deps), ...(next.parts ? { parts: next.parts } : {}), ...(next.tail !== undefined ? { tail: next.tail } : {}) };
    if (!(await advanceUpload(deps.db, project.id, record.upload_id, offset, advance))) {
      throw errors.conflict(`upload ${record.upload_id} was written by another request meanwhile: ask where it stands (HEAD)`);
    }
    Object.assign(record, advance, next.parts ? { parts: next.parts } : {});
  } else {
    await body.body.cancel().catch(() => {});
  }
  if (record.offset === record.length && record.completed_at === undefined) await finishUpload(deps, call, project, record, bytes);
  return stateOf(record);
}

/** DELETE: the upload and its bytes go (a completed upload's object stays). */
export async function terminateResumable(deps: Deps, call: UploadCall, uploadId: string): Promise<void> {
  const { project, record } = await ownedUpload(deps, call, uploadId);
  await dropUpload(deps, call.requestId, project, record);
}
