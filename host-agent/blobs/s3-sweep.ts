/**
 * The sweep of `s3` blobs no catalog row references (docs/storage.md "Nothing lost" 8), the `s3`
 * counterpart of ./sweep.ts: what a crash between a blob's write and its catalog flip leaves, or a
 * delete of a replaced or deleted object's blob that failed or never ran.
 *
 * Crash-safe the same way: for each project under `blobs/` in `SVCD_S3_BUCKET` that this agent
 * hosts, the blobs last modified before `now - minAgeMs` are listed first, and only then are the
 * project's rows and function modules read, consistently; a listed blob none of them names is
 * deleted. A row can only come to name a blob its own writer wrote, before its flip, so a blob older
 * than the age rule (by S3's `LastModified`) that no row names now is nobody's. A project whose rows
 * cannot be read keeps its blobs. Listing needs `s3:ListBucket` on the blob bucket besides
 * `s3:DeleteObject` (as a project's deletion does).
 */
import { ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { createS3BlobStore, createS3Client, s3KeyOf, type S3Settings } from '../../shared/blobs/s3.ts';
import { BLOB_NAME_PATTERN } from '../../shared/blobs/names.ts';
import type { Db } from '../../shared/db/client.ts';
import { moduleReferences } from '../../shared/db/functions.ts';
import { getProject } from '../../shared/db/projects.ts';
import { referencedBlobs } from '../../shared/db/storage.ts';
import { ID_PATTERNS } from '../../shared/ids.ts';
import type { BlobSweep } from './sweep.ts';

/** Every key (or common prefix, with `delimiter`) under `prefix`, page by page. */
async function* listed(client: S3Client, bucket: string, prefix: string, delimiter?: string): AsyncGenerator<{ key: string; modified: number }> {
  let token: string | undefined;
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token, ...(delimiter ? { Delimiter: delimiter } : {}) }));
    for (const p of page.CommonPrefixes ?? []) if (p.Prefix) yield { key: p.Prefix, modified: 0 };
    for (const o of page.Contents ?? []) if (o.Key) yield { key: o.Key, modified: o.LastModified?.getTime() ?? Number.POSITIVE_INFINITY };
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
}

/** Sweeps the `s3` blobs of the projects `agentId` hosts: older than `minAgeMs` and named by no row. */
export async function sweepUnreferencedS3Blobs(settings: S3Settings, db: Db, agentId: string, minAgeMs: number, now: number): Promise<BlobSweep> {
  const sweep: BlobSweep = { removed: [], failed: [] };
  const client = createS3Client(settings);
  const store = createS3BlobStore(client, settings.SVCD_S3_BUCKET);
  const bucket = settings.SVCD_S3_BUCKET;
  try {
    const projects: string[] = [];
    for await (const { key } of listed(client, bucket, 'blobs/', '/')) {
      const id = key.slice('blobs/'.length, -1);
      if (ID_PATTERNS.prj.test(id)) projects.push(id);
    }
    for (const projectId of projects) {
      try {
        const project = await getProject(db, projectId);
        if (!project || project.agent_id !== agentId) continue;
        // Listed before the rows are read: a blob older than the age rule cannot gain a row after.
        const prefix = s3KeyOf(projectId, '');
        const candidates: string[] = [];
        for await (const { key, modified } of listed(client, bucket, prefix)) {
          const name = key.slice(prefix.length);
          if (BLOB_NAME_PATTERN.test(name) && modified < now - minAgeMs) candidates.push(name);
        }
        if (candidates.length === 0) continue;
        // Function modules live in the same store (docs/functions.md "Where the bytes are").
        const referenced = new Set([...(await referencedBlobs(db, projectId)), ...(await moduleReferences(db, projectId)).blobs]);
        for (const name of candidates) {
          if (referenced.has(name)) continue;
          await store.delete(projectId, name);
          sweep.removed.push(`${projectId}/${name}`);
        }
      } catch (err) {
        sweep.failed.push(`${projectId} (${(err as Error).name ?? 'Error'})`);
      }
    }
  } catch (err) {
    sweep.failed.push(`the blob bucket could not be listed (${(err as Error).name ?? 'Error'})`);
  } finally {
    client.destroy();
  }
  return sweep;
}
