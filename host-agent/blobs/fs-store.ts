/**
 * The `fs` blob backend on the host agent (docs/storage.md; `blobs/` under `SVCD_ROOT`, docs/lifecycle.md "Directory layout").
 *
 * - A blob's path is `blobs/<project>/<name[0..2]>/<name>`: the project id and the name are checked
 *   against their fixed patterns (the name is a SHA-256 hex, shared/blobs/names.ts), so no object
 *   key ever reaches the file system and nothing can escape the root.
 * - Writes stream into a temp file under `blobs/.tmp/` while the SHA-256 (the etag) is computed,
 *   then fsync, rename into place and fsync the directory: a blob is either complete and durable or
 *   absent. The temp file is removed on any failure; temp files left by a crash are swept when the
 *   store opens.
 * - Blobs are never rewritten (each write has a fresh name); a read holds its file open, so a blob
 *   deleted after a catalog flip still finishes streaming to a reader that already had it.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { mkdir, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Writable } from 'node:stream';
import { BLOB_NAME_PATTERN } from '../../shared/blobs/names.ts';
import type { BlobWritten, ByteRange } from '../../shared/blobs/store.ts';
import { tooLargeError } from '../../shared/blobs/limit.ts';
import { errors } from '../../shared/errors.ts';
import { ID_PATTERNS, randomHex } from '../../shared/ids.ts';

/** Bytes gathered per file write, and read per chunk: few thread-pool trips, bounded memory. */
const WRITE_BYTES = 1024 * 1024;
const READ_BYTES = 256 * 1024;
/**
 * Written bytes after which a `datasync` is started in the background while the body keeps coming,
 * so that the closing `fsync` finds little left to flush instead of the whole blob.
 */
const SYNC_BYTES = 8 * 1024 * 1024;

/** Options of one write. */
export interface FsPutOptions {
  maxBytes: number;
  /** The declared length, or null: more or fewer bytes than this fail the write. */
  length: number | null;
  /**
   * The body's chunks are the store's once read: fresh buffers nobody else holds (the HTTP layer's
   * copies). Each is released as soon as it is copied into the write buffer, rather than left to
   * the garbage collector, which lets a cold process's RSS grow by the whole body before it runs.
   * Only a chunk that is a whole ArrayBuffer of its own is released.
   */
  ownsChunks?: boolean;
}

/**
 * An open blob: `length` bytes out of `size`, to be read once, either as a web stream (`body`) or
 * written onto a Node stream (`writeTo`, on two buffers it reuses: no garbage per chunk).
 */
export interface FsBlobRead {
  body: ReadableStream<Uint8Array>;
  /** Writes the bytes onto `out` (without ending it), each buffer reused once `out` has taken it. */
  writeTo(out: Writable): Promise<void>;
  length: number;
  size: number;
}

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
}

/** Thrown by `open` when the asked range lies outside the blob. */
export class RangeNotSatisfiableError extends Error {
  readonly size: number;
  constructor(size: number) {
    super(`range not satisfiable for a blob of ${size} bytes`);
    this.name = 'RangeNotSatisfiableError';
    this.size = size;
  }
}

/**
 * Removes the temp files under `<root>/.tmp` and answers their names. Only while no write is in
 * flight (agent start, store opening): anything there is then the remains of a crashed write.
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

/** Opens the store under `root` (created when missing), sweeping temp files a crash left behind. */
export function createFsBlobStore(root: string): FsBlobStore {
  const tmpDir = join(root, '.tmp');
  mkdirSync(tmpDir, { recursive: true });
  sweepBlobTempFiles(root);

  function pathOf(project: string, name: string): string {
    if (!ID_PATTERNS.prj.test(project)) throw errors.invalid('project: must match ^prj_[0-9a-f]{16}$');
    if (!BLOB_NAME_PATTERN.test(name)) throw errors.invalid('name: must be 64 lowercase hex characters');
    return join(root, project, name.slice(0, 2), name);
  }

  return {
    root,
    pathOf,

    async put(project, name, body, { maxBytes, length, ownsChunks = false }) {
      const target = pathOf(project, name);
      if (length !== null && length > maxBytes) throw tooLargeError(maxBytes);
      const tmp = join(tmpDir, `${name}.${randomHex(8)}`);
      const hash = createHash('sha256');
      let size = 0;
      let file: FileHandle | undefined;
      let writing: Promise<void> | undefined;
      let syncing: Promise<void> | undefined;
      let unsynced = 0;
      const reader = body.getReader();
      try {
        file = await open(tmp, 'wx', 0o600);
        const out = file;
        // Socket chunks are small: gather them into a buffer and write that, so a write costs one
        // trip to the thread pool per MiB rather than per chunk. Two buffers take turns: while one
        // is being written (off the main thread) the next fills and is hashed, so the socket, the
        // hash and the disk overlap instead of waiting on each other (memory stays at 2 MiB).
        // No bigger than the body declares: a small PUT does not zero 2 MiB.
        const capacity = Math.max(1, Math.min(WRITE_BYTES, maxBytes + 1, length ?? WRITE_BYTES));
        let buffer = new Uint8Array(capacity);
        let spare = new Uint8Array(capacity);
        let filled = 0;
        const flush = async () => {
          const bytes = buffer.subarray(0, filled);
          // Hashed once per buffer, in place (no copy); the write only reads the buffer too.
          hash.update(bytes);
          if (writing) await writing;
          unsynced += bytes.byteLength;
          // Flush what is written so far to disk while the rest arrives (one sync in flight at a time).
          const sync = unsynced >= SYNC_BYTES && !syncing;
          if (sync) unsynced = 0;
          writing = writeAll(out, bytes).then(() => {
            if (sync) {
              syncing = out.datasync().finally(() => (syncing = undefined));
              // Settled later (awaited before the closing fsync, or the cleanup).
              syncing.catch(() => {});
            }
          });
          // Settled later (awaited before the next flush, the fsync, or the cleanup).
          writing.catch(() => {});
          [buffer, spare] = [spare, buffer];
          filled = 0;
        };
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          size += value.byteLength;
          if (size > maxBytes) throw tooLargeError(maxBytes);
          if (length !== null && size > length) throw errors.invalid('body: longer than its declared length');
          let at = 0;
          while (at < value.byteLength) {
            const n = Math.min(buffer.byteLength - filled, value.byteLength - at);
            buffer.set(value.subarray(at, at + n), filled);
            filled += n;
            at += n;
            if (filled === buffer.byteLength) await flush();
          }
          if (ownsChunks) release(value);
        }
        if (filled > 0) await flush();
        if (writing) await writing;
        writing = undefined;
        if (syncing) await syncing;
        if (length !== null && size !== length) throw errors.invalid('body: shorter than its declared length');
        await file.sync();
        await file.close();
        file = undefined;
        const created = await mkdir(dirname(target), { recursive: true });
        await rename(tmp, target);
        await syncDir(dirname(target));
        // New directories are entries of their parents: make those durable too.
        if (created) for (const dir of [dirname(dirname(target)), root]) await syncDir(dir);
        return { size, etag: hash.digest('hex') };
      } catch (err) {
        // Not cancelled: cancelling would destroy the request and with it the 413 still to answer.
        reader.releaseLock();
        await writing?.catch(() => {});
        await syncing?.catch(() => {});
        await file?.close().catch(() => {});
        await rm(tmp, { force: true });
        throw err;
      }
    },

    async open(project, name, range) {
      const path = pathOf(project, name);
      let file: FileHandle;
      try {
        file = await open(path, 'r');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw err;
      }
      try {
        const { size } = await file.stat();
        const r = range ? range(size) : null;
        if (range && !r) throw new RangeNotSatisfiableError(size);
        const start = r?.start ?? 0;
        const end = r?.end ?? size - 1;
        const length = end - start + 1;
        if (length <= 0) {
          await file.close();
          return { body: new ReadableStream({ start: (c) => c.close() }), writeTo: async () => {}, length: 0, size };
        }
        // Made on first use only: a stream starts reading at once, and `writeTo` may be the reader.
        let body: ReadableStream<Uint8Array> | undefined;
        return {
          get body() {
            return (body ??= fileBytes(file, start, length));
          },
          writeTo: (out) => writeFileTo(file, start, length, out),
          length,
          size,
        };
      } catch (err) {
        await file.close().catch(() => {});
        throw err;
      }
    },

    async delete(project, name) {
      try {
        await rm(pathOf(project, name));
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw err;
      }
    },
  };
}

/**
 * `length` bytes of `file` from `start` as a web stream that owns the file (closed at the end, on
 * error and on cancel). Each chunk is a fresh buffer the file is read into directly: no Node stream
 * in between, whose conversion to a web stream would copy every chunk once more.
 */
function fileBytes(file: FileHandle, start: number, length: number): ReadableStream<Uint8Array> {
  let at = start;
  const end = start + length;
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    file.close().catch(() => {});
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const want = Math.min(READ_BYTES, end - at);
          const chunk = new Uint8Array(Buffer.allocUnsafeSlow(want).buffer, 0, want);
          let got = 0;
          while (got < want) {
            const { bytesRead } = await file.read(chunk, got, want - got, at + got);
            // The blob is immutable: a short file means it was damaged, not that it is being written.
            if (bytesRead === 0) throw new Error(`blob ended ${end - at - got} bytes early`);
            got += bytesRead;
          }
          at += got;
          controller.enqueue(chunk);
          if (at >= end) {
            close();
            controller.close();
          }
        } catch (err) {
          close();
          controller.error(err);
        }
      },
      cancel: close,
    },
    // One chunk read ahead of the consumer.
    { highWaterMark: 1 },
  );
}

/**
 * `length` bytes of `file` from `start` written onto `out` through two buffers taking turns: one is
 * read into while the other is being written, and a buffer is read into again only once `out` has
 * taken it (its write callback), which is the backpressure too. Closes the file in every case.
 */
async function writeFileTo(file: FileHandle, start: number, length: number, out: Writable): Promise<void> {
  const size = Math.min(READ_BYTES, length);
  const buffers = [Buffer.allocUnsafeSlow(size), Buffer.allocUnsafeSlow(size)];
  const writes: (Promise<void> | null)[] = [null, null];
  const end = start + length;
  let at = start;
  let turn = 0;
  try {
    while (at < end) {
      const buffer = buffers[turn]!;
      await writes[turn];
      const want = Math.min(size, end - at);
      let got = 0;
      while (got < want) {
        const { bytesRead } = await file.read(buffer, got, want - got, at + got);
        // The blob is immutable: a short file means it was damaged, not that it is being written.
        if (bytesRead === 0) throw new Error(`blob ended ${end - at - got} bytes early`);
        got += bytesRead;
      }
      at += got;
      const chunk = buffer.subarray(0, got);
      writes[turn] = new Promise<void>((resolve, reject) => out.write(chunk, (err) => (err ? reject(err) : resolve())));
      // Settled later (awaited before the buffer is read into again, or below).
      writes[turn]!.catch(() => {});
      turn = 1 - turn;
    }
    await Promise.all(writes);
  } finally {
    await file.close().catch(() => {});
  }
}

/** Frees the memory of a chunk that is a whole ArrayBuffer of its own (ES2024 `transfer` detaches it). */
function release(chunk: Uint8Array): void {
  const buffer = chunk.buffer as ArrayBuffer & { transfer?: (length: number) => ArrayBuffer };
  if (chunk.byteOffset === 0 && chunk.byteLength === buffer.byteLength && typeof buffer.transfer === 'function') buffer.transfer(0);
}

async function writeAll(file: FileHandle, bytes: Uint8Array): Promise<void> {
  let at = 0;
  while (at < bytes.byteLength) {
    const { bytesWritten } = await file.write(bytes, at, bytes.byteLength - at);
    at += bytesWritten;
  }
}

/** fsync of a directory, so the rename that made a blob visible survives a crash. */
async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
