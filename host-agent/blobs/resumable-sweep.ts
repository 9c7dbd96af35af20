/**
 * The expiry of resumable uploads while the agent runs (docs/storage.md "Resumable uploads",
 * expiration): every minute (sooner when `SVCD_RESUMABLE_EXPIRY_SECONDS` is shorter), each expired
 * upload of the projects this agent hosts (found in the index under the agent, where its creation
 * put it) loses its bytes and then its record; `fs` files no record names are removed too once they
 * are older than a sweep period (a record may be written just after its file's first bytes).
 *
 * `fs`: the files under `blobs/.uploads/`. `s3`: the upload's multipart upload and its incomplete
 * part (shared/blobs/multipart-s3.ts), found through the records; a multipart upload whose record
 * was never written (a crash inside a creation) is the blob sweep's age rule's to leave, and S3's
 * lifecycle rule for incomplete multipart uploads is the deployment's (docs/deploy.md).
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ResumableBytes } from '../../shared/blobs/multipart.ts';
import { createS3ResumableBytes } from '../../shared/blobs/multipart-s3.ts';
import { createS3Client } from '../../shared/blobs/s3.ts';
import { deleteUpload, getUpload, uploadsOn, type UploadRecord } from '../../shared/db/uploads.ts';
import type { AgentContext } from '../context.ts';
import { resumableFilesOf, type ResumableFiles } from './resumable.ts';

/** The longest wait between two sweeps. */
export const UPLOAD_SWEEP_MS = 60_000;

/** What one sweep removed: `<project>/<upload_id>`. */
export interface UploadSweep {
  removed: string[];
  failed: string[];
}

/**
 * One sweep at `now`: the expired uploads of the projects `ctx` hosts (the index of its uploads,
 * shared/db/uploads.ts `uploadsOn`), then the fs files no record names that are older than `orphanAgeMs`.
 */
export async function sweepExpiredUploads(ctx: AgentContext, s3: ResumableBytes | null, now: number, orphanAgeMs: number): Promise<UploadSweep> {
  const sweep: UploadSweep = { removed: [], failed: [] };
  const files = resumableFilesOf(ctx.blobs);
  for (const record of await uploadsOn(ctx.db, ctx.agentId)) {
    if (Date.parse(record.expires_at) > now) continue;
    try {
      await dropBytes(record, files, s3);
      await deleteUpload(ctx.db, record.project, record.upload_id);
      sweep.removed.push(`${record.project}/${record.upload_id}`);
    } catch (err) {
      sweep.failed.push(`${record.project}/${record.upload_id} (${(err as Error).message})`);
    }
  }
  for (const [project, id] of await files.list()) {
    try {
      const modified = await stat(join(ctx.blobs.root, '.uploads', project, id)).then((s) => s.mtimeMs, () => now);
      // A record read consistently, after the file was listed: a younger file may still be named.
      if (now - modified < orphanAgeMs || (await getUpload(ctx.db, project, id))) continue;
      await files.remove(project, id);
      sweep.removed.push(`${project}/${id}`);
    } catch (err) {
      sweep.failed.push(`${project}/${id} (${(err as Error).message})`);
    }
  }
  return sweep;
}

async function dropBytes(record: UploadRecord, files: ResumableFiles, s3: ResumableBytes | null): Promise<void> {
  if (record.completed_at !== undefined) return;
  if (record.backend === 'fs') {
    await files.remove(record.project, record.upload_id);
    return;
  }
  if (!s3) throw new Error('an s3 upload on a deployment without s3 settings');
  await s3.abort(
    { project: record.project, uploadId: record.upload_id, blob: record.blob, contentType: record.content_type, length: record.length },
    { offset: record.offset, ...(record.multipart_id ? { multipartId: record.multipart_id } : {}) },
  );
}

/** Sweeps every `UPLOAD_SWEEP_MS` (or the expiry, when shorter) while the agent runs; answers the function that stops it. */
export function sweepUploadsPeriodically(ctx: AgentContext): () => void {
  const everyMs = Math.min(UPLOAD_SWEEP_MS, ctx.settings.SVCD_RESUMABLE_EXPIRY_SECONDS * 1000);
  const s3 = ctx.settings.SVCD_BLOB_BACKEND === 's3' ? createS3ResumableBytes(createS3Client(ctx.settings), ctx.settings.SVCD_S3_BUCKET) : null;
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    sweepExpiredUploads(ctx, s3, ctx.now(), everyMs)
      .then((sweep) => {
        if (sweep.removed.length > 0 || sweep.failed.length > 0) {
          ctx.log(`agent: resumable uploads swept: ${sweep.removed.length} removed (${sweep.removed.join(', ')})${sweep.failed.length ? `; failed: ${sweep.failed.join(', ')}` : ''}`);
        }
      })
      .catch((err: Error) => ctx.log(`agent: sweeping resumable uploads failed: ${err.message}`))
      .finally(() => (running = false));
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
