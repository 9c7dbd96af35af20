/**
 * The byte limit of object bodies (contract "Limits"; DESIGN §3): a pass-through stream that counts
 * and fails as soon as the count passes the limit, so an oversized body is refused without ever
 * being held, whether or not it declared a `Content-Length`.
 */
import { errors, type ServiceError } from '../errors.ts';

/** A counting stream and what it saw. */
export interface ByteLimit {
  stream: TransformStream<Uint8Array, Uint8Array>;
  /**
   * The error this stream raised (413 over the limit, 400 for a length mismatch), or null. A write
   * that failed while consuming the stream answers this rather than the transport's own error.
   */
  failure(): ServiceError | null;
  /** Bytes passed so far. */
  count(): number;
}

/**
 * Counts bytes up to `maxBytes`. With a declared length, a body that ends early or runs long is
 * refused too (the blob would not be what the client meant to send).
 */
export function byteLimit(maxBytes: number, declared: number | null): ByteLimit {
  let count = 0;
  let failed: ServiceError | null = null;
  const fail = (controller: TransformStreamDefaultController<Uint8Array>, err: ServiceError) => {
    failed = err;
    controller.error(err);
  };
  const stream = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      count += chunk.byteLength;
      if (count > maxBytes) return fail(controller, tooLargeError(maxBytes));
      if (declared !== null && count > declared) return fail(controller, errors.invalid('body: longer than its Content-Length'));
      controller.enqueue(chunk);
    },
    flush(controller) {
      if (declared !== null && count !== declared) fail(controller, errors.invalid('body: shorter than its Content-Length'));
    },
  });
  return { stream, failure: () => failed, count: () => count };
}

/** The 413 of a body over the object byte limit. */
export function tooLargeError(maxBytes: number): ServiceError {
  return errors.tooLarge(`body exceeds the object byte limit of ${maxBytes} bytes`);
}
