/**
 * One write of the `fs` blob backend (host-agent/blobs/fs-store.ts, docs/storage.md "Streaming and
 * the byte limit"): the body streams into a temp file while its SHA-256 (the etag) is computed, then
 * fsync, rename into place and fsync of the directories: a blob is either complete and durable or
 * absent, and the temp file is removed on any failure.
 */
import { createHash } from 'node:crypto';
import { mkdir, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { tooLargeError } from '../../shared/blobs/limit.ts';
import type { BlobWritten } from '../../shared/blobs/store.ts';
import { errors } from '../../shared/errors.ts';

/** Bytes gathered per file write: few thread-pool trips, bounded memory. */
const WRITE_BYTES = 1024 * 1024;
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
  /**
   * The request's end without an answer (the caller gone, its connection cut): the write fails at
   * once and its temp file is removed. A body read from a paused socket may never fail by itself:
   * node notices a peer gone only when it reads or writes (docs/storage.md "Nothing left behind").
   */
  signal?: AbortSignal;
}

/**
 * Writes `body` to the temp file `tmp` and, once complete, renames it to `target` under `root`
 * durably. Answers the size and the SHA-256 hex; removes the temp file when it throws.
 */
export async function writeBlobFile(root: string, tmp: string, target: string, body: ReadableStream<Uint8Array>, options: FsPutOptions): Promise<BlobWritten> {
  const { maxBytes, length, ownsChunks = false, signal } = options;
  if (length !== null && length > maxBytes) throw tooLargeError(maxBytes);
  const reader = body.getReader();
  const aborted = abortOf(signal);
  let file: TempFile | undefined;
  try {
    file = new TempFile(await open(tmp, 'wx', 0o600), Math.max(1, Math.min(WRITE_BYTES, maxBytes + 1, length ?? WRITE_BYTES)));
    let size = 0;
    for (;;) {
      const { done, value } = await (aborted ? Promise.race([reader.read(), aborted.promise]) : reader.read());
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) throw tooLargeError(maxBytes);
      if (length !== null && size > length) throw errors.invalid('body: longer than its declared length');
      await file.append(value);
      if (ownsChunks) release(value);
    }
    if (length !== null && size !== length) throw errors.invalid('body: shorter than its declared length');
    const etag = await file.close();
    file = undefined;
    await installBlob(root, tmp, target);
    return { size, etag };
  } catch (err) {
    // Not cancelled: cancelling would destroy the request and with it the 413 still to answer.
    reader.releaseLock();
    await file?.discard();
    await rm(tmp, { force: true });
    throw err;
  } finally {
    aborted?.dispose();
  }
}

/** A promise that rejects once `signal` aborts (never settles otherwise), and its release. */
function abortOf(signal: AbortSignal | undefined): { promise: Promise<never>; dispose(): void } | null {
  if (!signal) return null;
  let dispose = () => {};
  const promise = new Promise<never>((_, reject) => {
    const onAbort = () => reject(errors.invalid('body: the request ended before its body did'));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    dispose = () => signal.removeEventListener('abort', onAbort);
  });
  promise.catch(() => {});
  return { promise, dispose: () => dispose() };
}

/**
 * A temp file being written. Socket chunks are small: they are gathered into a buffer and that is
 * written, so a write costs one trip to the thread pool per MiB rather than per chunk. Two buffers
 * take turns: while one is being written (off the main thread) the next fills and is hashed, so the
 * socket, the hash and the disk overlap instead of waiting on each other (memory stays at 2 MiB).
 * No bigger than the body declares: a small PUT does not zero 2 MiB.
 */
class TempFile {
  readonly #file: FileHandle;
  readonly #hash = createHash('sha256');
  #buffer: Uint8Array;
  #spare: Uint8Array;
  #filled = 0;
  #writing: Promise<void> | undefined;
  #syncing: Promise<void> | undefined;
  #unsynced = 0;

  constructor(file: FileHandle, capacity: number) {
    this.#file = file;
    this.#buffer = new Uint8Array(capacity);
    this.#spare = new Uint8Array(capacity);
  }

  /** Copies `chunk` into the write buffers, writing each one that fills. */
  async append(chunk: Uint8Array): Promise<void> {
    let at = 0;
    while (at < chunk.byteLength) {
      const n = Math.min(this.#buffer.byteLength - this.#filled, chunk.byteLength - at);
      this.#buffer.set(chunk.subarray(at, at + n), this.#filled);
      this.#filled += n;
      at += n;
      if (this.#filled === this.#buffer.byteLength) await this.#flush();
    }
  }

  /** Writes what is left, syncs and closes the file; answers the SHA-256 hex of every byte. */
  async close(): Promise<string> {
    if (this.#filled > 0) await this.#flush();
    await this.#writing;
    this.#writing = undefined;
    await this.#syncing;
    await this.#file.sync();
    await this.#file.close();
    return this.#hash.digest('hex');
  }

  /** Waits for what is in flight and closes the file, ignoring every failure (the write failed already). */
  async discard(): Promise<void> {
    await this.#writing?.catch(() => {});
    await this.#syncing?.catch(() => {});
    await this.#file.close().catch(() => {});
  }

  async #flush(): Promise<void> {
    const bytes = this.#buffer.subarray(0, this.#filled);
    // Hashed once per buffer, in place (no copy); the write only reads the buffer too.
    this.#hash.update(bytes);
    await this.#writing;
    this.#unsynced += bytes.byteLength;
    // Flush what is written so far to disk while the rest arrives (one sync in flight at a time).
    const sync = this.#unsynced >= SYNC_BYTES && !this.#syncing;
    if (sync) this.#unsynced = 0;
    this.#writing = writeAll(this.#file, bytes).then(() => {
      if (!sync) return;
      this.#syncing = this.#file.datasync().finally(() => (this.#syncing = undefined));
      // Settled later (awaited before the closing fsync, or the cleanup).
      this.#syncing.catch(() => {});
    });
    // Settled later (awaited before the next flush, the fsync, or the cleanup).
    this.#writing.catch(() => {});
    [this.#buffer, this.#spare] = [this.#spare, this.#buffer];
    this.#filled = 0;
  }
}

/** Renames the complete temp file into place and makes the rename (and any new directory) durable. */
export async function installBlob(root: string, tmp: string, target: string): Promise<void> {
  const created = await mkdir(dirname(target), { recursive: true });
  await rename(tmp, target);
  await syncDir(dirname(target));
  // New directories are entries of their parents: make those durable too.
  if (created) for (const dir of [dirname(dirname(target)), root]) await syncDir(dir);
}

/** Frees the memory of a chunk that is a whole ArrayBuffer of its own (ES2024 `transfer` detaches it). */
export function release(chunk: Uint8Array): void {
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
