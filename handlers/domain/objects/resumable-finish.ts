/**
 * The end of a resumable upload (docs/storage.md "Resumable uploads"): completion, which makes it
 * an object exactly as a PUT makes one, and expiry, which removes its bytes. Also which bytes store
 * serves a project's uploads.
 *
 * Completion is three steps, each safe to repeat after a crash before the next: the store makes the
 * bytes the upload's blob (a rename on `fs`, CompleteMultipartUpload on `s3`; done again it finds
 * the blob), the catalog row flips to that blob with its receipt (skipped when the row already
 * names it), the upload is marked complete. Whoever next finds the upload at its full offset and
 * not marked (a HEAD, a PATCH) finishes it.
 */
import type { SessionClaims } from '../../../shared/auth.ts';
import { agentResumableBytes, type ResumableBytes, type UploadProgress, type UploadTarget } from '../../../shared/blobs/multipart.ts';
import type { BlobBackend } from '../../../shared/blobs/store.ts';
import type { ProjectRecord } from '../../../shared/db/projects.ts';
import { getObject, type ObjectRecord } from '../../../shared/db/storage.ts';
import { completeUpload, deleteUpload, type UploadRecord } from '../../../shared/db/uploads.ts';
import { ServiceError, errors } from '../../../shared/errors.ts';
import { nowIso } from '../../../shared/time.ts';
import type { Deps } from '../../context.ts';
import { agentFor } from '../placement.ts';
import { storeFor } from './blobs.ts';
import { flipRow } from './put.ts';

/** Who acts on an upload, and where the work that outlives the answer goes. */
export interface UploadCall {
  requestId: string;
  session: SessionClaims;
  projectId: string;
  afterAnswer(task: Promise<void>): void;
}

/** The bytes store of a project's uploads on `backend`. */
export async function bytesFor(deps: Deps, requestId: string, project: ProjectRecord, backend: BlobBackend): Promise<ResumableBytes> {
  if (backend === 's3') return deps.s3Resumable();
  try {
    return agentResumableBytes(deps.agents, await agentFor(deps, project, undefined, { reuse: true }), requestId);
  } catch (err) {
    // The project's agent is the storage upstream here (docs/storage.md "Errors").
    if (err instanceof ServiceError && err.code === 'orchestrator_unavailable') throw errors.upstream(err.message);
    throw err;
  }
}

/** What the bytes store is told of an upload. */
export function targetOf(record: UploadRecord): UploadTarget {
  return { project: record.project, uploadId: record.upload_id, blob: record.blob, contentType: record.content_type, length: record.length };
}

/** How far the upload got, as its record says. */
export function progressOf(record: UploadRecord): UploadProgress {
  return {
    offset: record.offset,
    ...(record.multipart_id ? { multipartId: record.multipart_id } : {}),
    ...(record.parts ? { parts: record.parts } : {}),
    ...(record.tail !== undefined ? { tail: record.tail } : {}),
  };
}

/** Whether the upload has expired (a completed one too: its record is then only forgotten). */
export function expired(deps: Deps, record: UploadRecord): boolean {
  return Date.parse(record.expires_at) <= deps.now();
}

/**
 * Removes an upload that expired or is terminated: its bytes (unless it completed: those are the
 * object's), then its record. A failure to remove the bytes leaves the record, for the agent's
 * periodic sweep to try again.
 */
export async function dropUpload(deps: Deps, requestId: string, project: ProjectRecord, record: UploadRecord): Promise<void> {
  if (record.completed_at === undefined) await (await bytesFor(deps, requestId, project, record.backend)).abort(targetOf(record), progressOf(record));
  await deleteUpload(deps.db, project.id, record.upload_id);
}

/** Makes the complete upload its object (the three steps above); answers the stored row. */
export async function finishUpload(deps: Deps, call: UploadCall, project: ProjectRecord, record: UploadRecord, bytes: ResumableBytes): Promise<ObjectRecord | null> {
  const written = await bytes.finish(targetOf(record), progressOf(record));
  const current = await getObject(deps.db, project.id, record.bucket, record.key);
  let row: ObjectRecord | null = current;
  if (current?.blob !== record.blob) {
    const store = await storeFor(deps, call.requestId, project, record.backend);
    ({ row } = await flipRow(deps, {
      requestId: call.requestId,
      accountId: call.session.accountId,
      project,
      backend: record.backend,
      store,
      bucket: record.bucket,
      key: record.key,
      contentType: record.content_type,
      precondition: { ifMatch: null, ifNoneMatch: null },
      current,
      name: record.blob,
      written,
      afterAnswer: call.afterAnswer,
    }));
  }
  await completeUpload(deps.db, project.id, record.upload_id, nowIso(deps.now()));
  return row;
}
