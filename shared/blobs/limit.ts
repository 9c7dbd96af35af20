/**
 * The byte limit of object bodies (the interface contract "Limits"; docs/storage.md "Streaming and the byte limit"). Where it is enforced, without ever
 * holding a body:
 * - a declared `Content-Length` over the limit: by the handler, before a byte is read;
 * - a declared length within it: by the HTTP layer, which delimits the body to that length (the
 *   body then goes to the store untouched: in workerd a JavaScript stream stage costs most of the
 *   throughput);
 * - no declared length: by counting, where the bytes are consumed anyway (the host agent's file
 *   writer for `fs`, the multipart part buffer for `s3`), failing as soon as the count passes it.
 */
import { errors, type ServiceError } from '../errors.ts';

/**
 * The 413 of a body over the object byte limit, saying what to do about it (docs/storage.md
 * "Streaming and the byte limit"): one request carries at most the limit, and a larger file goes
 * as a resumable upload in chunks (docs/storage.md "Resumable uploads").
 */
export function tooLargeError(maxBytes: number): ServiceError {
  return errors.tooLarge(
    `body exceeds the object byte limit of ${maxBytes} bytes (${mebibytes(maxBytes)}, SVCD_STORAGE_MAX_BYTES): ` +
      `one request carries at most that many bytes; upload a larger file with a resumable upload (TUS 1.0: POST /v0/projects/{id}/storage/resumable, ` +
      `then PATCH chunks of at most that size; svc storage cp and the SDK's storage.upload do this by themselves; docs/storage.md "Resumable uploads")`,
  );
}

/** `n` bytes in MiB (or bytes when under one), for a message. */
function mebibytes(n: number): string {
  return n >= 1024 * 1024 ? `${Math.round((n / (1024 * 1024)) * 10) / 10} MiB` : `${n} bytes`;
}

/** A body being counted (`countedBody`). */
export interface CountedBody {
  /** The body as it passes the count: it fails once the limit is passed or the signal aborts. */
  body: ReadableStream<Uint8Array>;
  /** Bytes counted so far. */
  size(): number;
  /** The body's own failure (the 413, the abort's reason), if it failed. */
  failure(): unknown;
}

/**
 * `body` counted as it is read: past `maxBytes` it fails with `tooLarge()` (default the object
 * limit's 413), once `signal` aborts with the abort's reason, and when `body` itself fails (a
 * request cut off), failing whoever reads it, and so
 * the upload it feeds, at once rather than when the client ends the body (docs/storage.md
 * "Streaming and the byte limit"). For bodies without a declared length only: a declared one is
 * delimited by the HTTP layer, and a JavaScript stage costs workerd most of its throughput.
 */
export function countedBody(
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
  signal: AbortSignal | undefined,
  tooLarge: () => ServiceError = () => tooLargeError(maxBytes),
): CountedBody {
  let size = 0;
  let failure: unknown;
  const reader = body.getReader();
  const fail = (controller: ReadableStreamDefaultController<Uint8Array>, reason: unknown) => {
    failure ??= reason;
    controller.error(failure);
    reader.cancel(failure).catch(() => {});
  };
  const onAbort = () => (failure ??= signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  // Pulled, not piped: the source failing (the client gone) is noted as the body's failure, since
  // a reader that sees the stream end may not be told why (workerd ends the chunked request body
  // it sends on cleanly); the reader giving up (an upstream that failed) is not the body's failure.
  const counted = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (signal?.aborted) return fail(controller, signal.reason);
        let step: ReadableStreamReadResult<Uint8Array>;
        try {
          step = await reader.read();
        } catch {
          return fail(controller, errors.invalid('body: the request ended before its body did'));
        }
        if (step.done) {
          signal?.removeEventListener('abort', onAbort);
          return controller.close();
        }
        size += step.value.byteLength;
        if (size > maxBytes) return fail(controller, tooLarge());
        controller.enqueue(step.value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
  return { body: counted, size: () => size, failure: () => failure };
}
