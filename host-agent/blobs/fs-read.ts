/**
 * Reads of the `fs` blob backend (host-agent/blobs/fs-store.ts): a blob opened once, its bytes given
 * as a web stream or written straight onto a Node stream from two reused buffers (docs/storage.md
 * "Streaming and the byte limit").
 */
import { open, type FileHandle } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import type { ByteRange } from '../../shared/blobs/store.ts';

/** Bytes read per chunk: few thread-pool trips, bounded memory. */
const READ_BYTES = 256 * 1024;

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

/** Thrown by `open` when the asked range lies outside the blob. */
export class RangeNotSatisfiableError extends Error {
  readonly size: number;
  constructor(size: number) {
    super(`range not satisfiable for a blob of ${size} bytes`);
    this.name = 'RangeNotSatisfiableError';
    this.size = size;
  }
}

/** Opens the blob at `path` (or an inclusive `range` of it, already within its size), or null when absent. */
export async function openBlobFile(path: string, range?: (size: number) => ByteRange | null): Promise<FsBlobRead | null> {
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
