/**
 * The `fs` side of resumable uploads (docs/storage.md "Resumable uploads"): each upload's bytes are
 * appended to one file, `blobs/.uploads/<project>/<upload_id>`, outside `.tmp/` (whose files the
 * temp sweeps remove) and outside the project's blob directories (whose unnamed files the blob sweep
 * removes). The handlers record an upload's offset only after an append here answered, and an
 * append answers only once its bytes are fsynced: so the bytes before a recorded offset are durable,
 * and an append starts by cutting the file back to the offset it is given, dropping whatever a PATCH
 * that died left after it. Completion hashes the file (SHA-256, the `fs` etag) and renames it into
 * place as the blob, durably (./fs-write.ts `installBlob`).
 *
 * One append or completion of an upload at a time (the others are refused with 409). The SHA-256
 * of an upload is carried along its appends in memory when they arrive in order on this process,
 * so completion need not read the file again; after a restart, it does.
 */
import { createHash, type Hash } from 'node:crypto';
import { mkdir, open, readdir, rm, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { LRUCache } from 'lru-cache';
import type { BlobWritten } from '../../shared/blobs/store.ts';
import { UPLOAD_ID_PATTERN } from '../../shared/schemas/resumable.ts';
import { errors } from '../../shared/errors.ts';
import { ID_PATTERNS } from '../../shared/ids.ts';
import type { FsBlobStore } from './fs-store.ts';
import { installBlob, release } from './fs-write.ts';

/** Bytes gathered per file write. */
const WRITE_BYTES = 1024 * 1024;

/** The resumable uploads' files of one fs store. */
export interface ResumableFiles {
  /** Appends `length` bytes of `body` at `offset`; answers the new offset once they are durable. */
  append(project: string, uploadId: string, offset: number, length: number, body: ReadableStream<Uint8Array>, signal?: AbortSignal): Promise<number>;
  /** Makes the upload of `length` bytes blob `name`; answers what a PUT would. Again after it did: the blob. */
  finish(project: string, uploadId: string, name: string, length: number): Promise<BlobWritten>;
  /** Removes the upload's file; answers whether there was one. */
  remove(project: string, uploadId: string): Promise<boolean>;
  /** The uploads that have a file, as `[project, uploadId]`. */
  list(): Promise<[string, string][]>;
}

const byStore = new WeakMap<FsBlobStore, ResumableFiles>();

/** The resumable files of `store` (one per store: its locks and running hashes are shared). */
export function resumableFilesOf(store: FsBlobStore): ResumableFiles {
  let files = byStore.get(store);
  if (!files) byStore.set(store, (files = createResumableFiles(store)));
  return files;
}

/** What the operations of one store's uploads share: where the files are, which are busy, the running hashes. */
interface Files {
  store: FsBlobStore;
  dir: string;
  busy: Set<string>;
  hashes: LRUCache<string, { hash: Hash; at: number }>;
}

function createResumableFiles(store: FsBlobStore): ResumableFiles {
  // The running SHA-256 of an upload and the offset it stands at (lost on restart: then re-read).
  const files: Files = { store, dir: join(store.root, '.uploads'), busy: new Set(), hashes: new LRUCache({ max: 1000 }) };
  return {
    append: (project, uploadId, offset, length, body, signal) => exclusive(files, uploadId, () => append(files, project, uploadId, offset, length, body, signal)),
    finish: (project, uploadId, name, length) => exclusive(files, uploadId, () => finish(files, project, uploadId, name, length)),
    async remove(project, uploadId) {
      files.hashes.delete(uploadId);
      try {
        await rm(pathOf(files, project, uploadId));
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw err;
      }
    },
    async list() {
      const found: [string, string][] = [];
      for (const project of await readdir(files.dir).catch(() => [] as string[])) {
        if (!ID_PATTERNS.prj.test(project)) continue;
        for (const id of await readdir(join(files.dir, project)).catch(() => [] as string[])) if (UPLOAD_ID_PATTERN.test(id)) found.push([project, id]);
      }
      return found;
    },
  };
}

function pathOf(files: Files, project: string, uploadId: string): string {
  if (!ID_PATTERNS.prj.test(project)) throw errors.invalid('project: must match ^prj_[0-9a-f]{16}$');
  if (!UPLOAD_ID_PATTERN.test(uploadId)) throw errors.invalid('upload: must match ^upl_[0-9a-f]{16}$');
  return join(files.dir, project, uploadId);
}

/** Runs `work` unless another append or completion of the upload runs (409 then). */
async function exclusive<T>(files: Files, uploadId: string, work: () => Promise<T>): Promise<T> {
  if (files.busy.has(uploadId)) throw errors.conflict(`upload ${uploadId} is being written by another request`);
  files.busy.add(uploadId);
  try {
    return await work();
  } finally {
    files.busy.delete(uploadId);
  }
}

async function append(files: Files, project: string, uploadId: string, offset: number, length: number, body: ReadableStream<Uint8Array>, signal?: AbortSignal): Promise<number> {
  const path = pathOf(files, project, uploadId);
  await mkdir(join(files.dir, project), { recursive: true });
  const file = await open(path, offset === 0 ? 'w' : 'r+', 0o600).catch((err: NodeJS.ErrnoException) => {
    throw err.code === 'ENOENT' ? errors.conflict(`upload ${uploadId} has no bytes here (offset ${offset})`) : err;
  });
  const known = files.hashes.get(uploadId);
  const hash = known?.at === offset ? known.hash.copy() : offset === 0 ? createHash('sha256') : null;
  try {
    if ((await file.stat()).size < offset) throw errors.conflict(`upload ${uploadId} holds fewer bytes than its offset ${offset}`);
    // Whatever a PATCH that died left after the recorded offset goes.
    await file.truncate(offset);
    const written = await copyInto(file, offset, length, body, hash, signal);
    if (written !== length) throw errors.invalid('body: shorter than its declared length');
    // The data before the new offset is durable before the handlers record it (the size too: the
    // file may have grown).
    await file.datasync();
  } catch (err) {
    await file.truncate(offset).catch(() => {});
    throw err;
  } finally {
    await file.close();
  }
  if (hash) files.hashes.set(uploadId, { hash, at: offset + length });
  else files.hashes.delete(uploadId);
  return offset + length;
}

async function finish(files: Files, project: string, uploadId: string, name: string, length: number): Promise<BlobWritten> {
  const path = pathOf(files, project, uploadId);
  const target = files.store.pathOf(project, name);
  const exists = (p: string) => stat(p).then((s) => s.size, () => null);
  let size = await exists(path);
  if (size === null && length === 0 && (await exists(target)) === null) {
    // An upload of 0 bytes never appended anything: its blob is an empty file.
    await mkdir(join(files.dir, project), { recursive: true });
    await (await open(path, 'w', 0o600)).close();
    size = 0;
  }
  if (size === null) {
    // Finished before (a crash came between the rename and the catalog flip): the blob is there.
    const etag = await hashFile(target).catch(() => null);
    if (etag === null) throw errors.notFound(`upload ${uploadId} has no bytes here`);
    return { size: (await stat(target)).size, etag };
  }
  if (size !== length) throw errors.conflict(`upload ${uploadId} holds ${size} bytes, not ${length}`);
  const known = files.hashes.get(uploadId);
  const etag = known?.at === length ? known.hash.digest('hex') : await hashFile(path);
  files.hashes.delete(uploadId);
  await installBlob(files.store.root, path, target);
  return { size, etag };
}

/**
 * Copies the body into `file` from `position` through one 1 MiB buffer (a thread-pool trip per MiB,
 * not per socket chunk), hashing as it goes; answers how many bytes came (more than `length` is
 * refused at once). The chunks are the HTTP parser's own, nobody else's once read: each is released
 * as soon as it is copied (./fs-write.ts `release`), so memory stays at the buffer, not the body.
 */
async function copyInto(file: FileHandle, position: number, length: number, body: ReadableStream<Uint8Array>, hash: Hash | null, signal?: AbortSignal): Promise<number> {
  const reader = body.getReader();
  const buffer = new Uint8Array(Math.max(1, Math.min(WRITE_BYTES, length)));
  let filled = 0;
  let count = 0;
  let at = position;
  const flush = async () => {
    const bytes = buffer.subarray(0, filled);
    hash?.update(bytes);
    for (let done = 0; done < bytes.byteLength; ) {
      const { bytesWritten } = await file.write(bytes, done, bytes.byteLength - done, at);
      done += bytesWritten;
      at += bytesWritten;
    }
    filled = 0;
  };
  try {
    for (;;) {
      if (signal?.aborted) throw errors.invalid('body: the request ended before its body did');
      const { done, value } = await reader.read();
      if (done) break;
      count += value.byteLength;
      if (count > length) throw errors.invalid('body: longer than its declared length');
      for (let from = 0; from < value.byteLength; ) {
        const n = Math.min(buffer.byteLength - filled, value.byteLength - from);
        buffer.set(value.subarray(from, from + n), filled);
        filled += n;
        from += n;
        if (filled === buffer.byteLength) await flush();
      }
      release(value);
    }
    if (filled > 0) await flush();
    return count;
  } finally {
    reader.releaseLock();
  }
}

/** The SHA-256 hex of a file's bytes. */
async function hashFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  const file = await open(path, 'r');
  try {
    for await (const chunk of file.createReadStream({ highWaterMark: 1024 * 1024, autoClose: false })) hash.update(chunk as Buffer);
  } finally {
    await file.close();
  }
  return hash.digest('hex');
}
