/**
 * The `fs` blob backend on the host agent (docs/storage.md; `blobs/` under `SVCD_ROOT`, docs/lifecycle.md "Directory layout").
 *
 * - A blob's path is `blobs/<project>/<name[0..2]>/<name>`: the project id and the name are checked
 *   against their fixed patterns (the name is a SHA-256 hex, shared/blobs/names.ts), so no object
 *   key ever reaches the file system and nothing can escape the root.
 * - Writes stream into a temp file under `blobs/.tmp/` while the SHA-256 (the etag) is computed,
 *   then fsync, rename into place and fsync the directory: a blob is either complete and durable or
 *   absent (./fs-write.ts). The temp file is removed on any failure; temp files left by a crash are
 *   swept at the agent's start, before any write (`sweepBlobTempFiles`, host-agent/sweep.ts), and
 *   while it runs, those no write of this store holds once they are idle (`sweepIdleTemp`).
 * - Blobs are never rewritten (each write has a fresh name); a read holds its file open, so a blob
 *   deleted after a catalog flip still finishes streaming to a reader that already had it (./fs-read.ts).
 */
import { mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { BLOB_NAME_PATTERN } from '../../shared/blobs/names.ts';
import type { BlobWritten, ByteRange } from '../../shared/blobs/store.ts';
import { errors } from '../../shared/errors.ts';
import { ID_PATTERNS, randomHex } from '../../shared/ids.ts';
import { openBlobFile, type FsBlobRead } from './fs-read.ts';
import { writeBlobFile, type FsPutOptions } from './fs-write.ts';

export { RangeNotSatisfiableError, type FsBlobRead } from './fs-read.ts';
export type { FsPutOptions } from './fs-write.ts';

/** The fs store under one root directory. */
export interface FsBlobStore {
  readonly root: string;
  /** Where a blob lives (validated; throws 400 for a malformed project or name). */
  pathOf(project: string, name: string): string;
  /** Streams `body` into blob `name`: at most `maxBytes`, exactly `length` when given. */
  put(project: string, name: string, body: ReadableStream<Uint8Array>, options: FsPutOptions): Promise<BlobWritten>;
  /** Opens a blob (or an inclusive `range` of it, already within its size), or null when absent. */
  open(project: string, name: string, range?: (size: number) => ByteRange | null): Promise<FsBlobRead | null>;
  /** Removes a blob; answers whether it existed. */
  delete(project: string, name: string): Promise<boolean>;
  /**
   * Removes the temp files no write of this store holds that were last written more than
   * `minAgeMs` before `now`, and answers their names (docs/storage.md "Nothing left behind").
   */
  sweepIdleTemp(minAgeMs: number, now: number): string[];
}

/**
 * Removes the temp files under `<root>/.tmp` and answers their names. Only while no write is in
 * flight (the agent's start): anything there is then the remains of a crashed write.
 */
export function sweepBlobTempFiles(root: string): string[] {
  const tmpDir = join(root, '.tmp');
  let names: string[];
  try {
    names = readdirSync(tmpDir);
  } catch {
    return [];
  }
  for (const f of names) rmSync(join(tmpDir, f), { force: true });
  return names;
}

/**
 * Opens the store under `root` (created when missing). Built once per agent (the agent context's
 * `blobs`); the temp files a crash left behind are the start's sweep to remove, which names them.
 */
export function createFsBlobStore(root: string): FsBlobStore {
  const tmpDir = join(root, '.tmp');
  mkdirSync(tmpDir, { recursive: true });
  // The temp files of the writes in flight: a sweep while the agent runs never touches them.
  const writing = new Set<string>();

  function pathOf(project: string, name: string): string {
    if (!ID_PATTERNS.prj.test(project)) throw errors.invalid('project: must match ^prj_[0-9a-f]{16}$');
    if (!BLOB_NAME_PATTERN.test(name)) throw errors.invalid('name: must be 64 lowercase hex characters');
    return join(root, project, name.slice(0, 2), name);
  }

  return {
    root,
    pathOf,
    async put(project, name, body, options) {
      const target = pathOf(project, name);
      const tmpName = `${name}.${randomHex(8)}`;
      writing.add(tmpName);
      try {
        return await writeBlobFile(root, join(tmpDir, tmpName), target, body, options);
      } finally {
        writing.delete(tmpName);
      }
    },
    open: async (project, name, range) => openBlobFile(pathOf(project, name), range),
    async delete(project, name) {
      try {
        await rm(pathOf(project, name));
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw err;
      }
    },
    sweepIdleTemp(minAgeMs, now) {
      const removed: string[] = [];
      let names: string[];
      try {
        names = readdirSync(tmpDir);
      } catch {
        return removed;
      }
      for (const f of names) {
        if (writing.has(f)) continue;
        try {
          if (now - statSync(join(tmpDir, f)).mtimeMs <= minAgeMs) continue;
          rmSync(join(tmpDir, f), { force: true });
          removed.push(f);
        } catch {
          // Gone meanwhile (its write finished or failed): nothing to remove.
        }
      }
      return removed;
    },
  };
}
