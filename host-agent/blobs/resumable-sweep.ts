/**
 * The expiry of resumable uploads while the agent runs (docs/storage.md "Resumable uploads",
 * expiration): every minute (sooner when `SVCD_RESUMABLE_EXPIRY_SECONDS` is shorter), for the
 * projects this agent hosts, each expired upload's bytes are removed and then its record; bytes no
 * record names any more are removed too once they are older than a sweep period (a creation writes
 * its record just after preparing its bytes, so younger ones may still be named).
 *
 * `fs`: the files under `blobs/.uploads/`. `s3`: the upload's multipart upload and its incomplete
 * part (shared/blobs/multipart-s3.ts), found through the records; a multipart upload whose record
 * was never written (a crash inside a creation) is the blob sweep's age rule's to leave, and S3's
 * lifecycle rule for incomplete multipart uploads is the deployment's (docs/deploy.md).
 */
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ResumableBytes } from '../../shared/blobs/multipart.ts';
import { createS3ResumableBytes } from '../../shared/blobs/multipart-s3.ts';
import { createS3Client } from '../../shared/blobs/s3.ts';
import { getProject } from '../../shared/db/projects.ts';
import { deleteUpload, listUploads, type UploadRecord } from '../../shared/db/uploads.ts';
import { ID_PATTERNS } from '../../shared/ids.ts';
import type { AgentContext } from '../context.ts';
import { resumableFilesOf, type ResumableFiles } from './resumable.ts';

/** The longest wait between two sweeps. */
export const UPLOAD_SWEEP_MS = 60_000;

/** What one sweep removed: `<project>/<upload_id>`. */
export interface UploadSweep {
  removed: string[];
  failed: string[];
}

/** One sweep of the uploads of the projects `ctx` hosts, at `now`. */
export async function sweepExpiredUploads(ctx: AgentContext, s3: ResumableBytes | null, now: number, orphanAgeMs: number): Promise<UploadSweep> {
  const sweep: UploadSweep = { removed: [], failed: [] };
  const files = resumableFilesOf(ctx.blobs);
  const withFiles = await files.list();
  const projects = new Set([...withFiles.map(([p]) => p), ...(await hostedProjectDirs(ctx))]);
  for (const projectId of projects) {
    try {
      const project = await getProject(ctx.db, projectId);
      if (project && project.agent_id !== ctx.agentId) continue;
      const records = project ? await listUploads(ctx.db, projectId) : [];
      const named = new Set(records.map((r) => r.upload_id));
      for (const record of records) {
        if (Date.parse(record.expires_at) > now) continue;
        await dropBytes(record, files, s3);
        await deleteUpload(ctx.db, projectId, record.upload_id);
        sweep.removed.push(`${projectId}/${record.upload_id}`);
      }
      for (const [p, id] of withFiles) {
        if (p !== projectId || named.has(id)) continue;
        const modified = await stat(join(ctx.blobs.root, '.uploads', p, id)).then((s) => s.mtimeMs, () => now);
        if (now - modified < orphanAgeMs) continue;
        await files.remove(p, id);
        sweep.removed.push(`${p}/${id}`);
      }
    } catch (err) {
      sweep.failed.push(`${projectId} (${(err as Error).message})`);
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

/** The projects with a directory of this agent's: its tenants', and its fs blob root's. */
async function hostedProjectDirs(ctx: AgentContext): Promise<string[]> {
  const found: string[] = [];
  for (const dir of [ctx.tenants.layout.tenants, ctx.blobs.root]) {
    for (const name of await readdir(dir).catch(() => [] as string[])) if (ID_PATTERNS.prj.test(name)) found.push(name);
  }
  return found;
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
