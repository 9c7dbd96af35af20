/**
 * The sweep of fs blobs no catalog row references (docs/storage.md "Nothing lost"): what a crash
 * between a blob's write and its catalog flip leaves, or a delete that could not reach this agent
 * (a replaced blob's, a DELETE's). A blob is removed only when it is older than
 * `SVCD_BLOB_SWEEP_MIN_AGE_SECONDS` (a younger one may belong to a PUT whose flip is still to come)
 * and a consistent read of the project's catalog finds no row pointing at it; only projects this
 * agent hosts are looked at, and a failed read leaves the project's blobs alone.
 */
import { readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { BLOB_NAME_PATTERN } from '../../shared/blobs/names.ts';
import type { Db } from '../../shared/db/client.ts';
import { getProject } from '../../shared/db/projects.ts';
import { referencedBlobs } from '../../shared/db/storage.ts';
import { moduleReferences } from '../../shared/db/functions.ts';
import { ID_PATTERNS } from '../../shared/ids.ts';

/** What the sweep removed (`<project>/<name>`) and what it could not look at or remove. */
export interface BlobSweep {
  removed: string[];
  failed: string[];
}

function entries(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Blob files of one project last written before `cutoff` (ms): `<project>/<name[0..2]>/<name>`. */
function oldBlobs(projectDir: string, cutoff: number): string[] {
  const names: string[] = [];
  for (const shard of entries(projectDir)) {
    if (!/^[0-9a-f]{2}$/.test(shard)) continue;
    for (const name of entries(join(projectDir, shard))) {
      if (!BLOB_NAME_PATTERN.test(name) || !name.startsWith(shard)) continue;
      try {
        if (statSync(join(projectDir, shard, name)).mtimeMs < cutoff) names.push(name);
      } catch {
        // Removed meanwhile.
      }
    }
  }
  return names;
}

/** Sweeps `root` (the fs store's directory) of blobs older than `minAgeMs` that no row references. */
export async function sweepUnreferencedBlobs(root: string, db: Db, agentId: string, minAgeMs: number, now: number): Promise<BlobSweep> {
  const sweep: BlobSweep = { removed: [], failed: [] };
  for (const projectId of entries(root).filter((n) => ID_PATTERNS.prj.test(n))) {
    const candidates = oldBlobs(join(root, projectId), now - minAgeMs);
    if (candidates.length === 0) continue;
    let referenced: Set<string>;
    try {
      const project = await getProject(db, projectId);
      if (!project || project.agent_id !== agentId) continue;
      // Function modules live in the same store (docs/functions.md "Where the bytes are").
      referenced = new Set([...(await referencedBlobs(db, projectId)), ...(await moduleReferences(db, projectId)).blobs]);
    } catch (err) {
      sweep.failed.push(`${projectId} (its catalog could not be read: ${(err as Error).message})`);
      continue;
    }
    for (const name of candidates) {
      if (referenced.has(name)) continue;
      try {
        rmSync(join(root, projectId, name.slice(0, 2), name), { force: true });
        sweep.removed.push(`${projectId}/${name}`);
      } catch (err) {
        sweep.failed.push(`${projectId}/${name} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
      }
    }
  }
  return sweep;
}
