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

/** The 413 of a body over the object byte limit. */
export function tooLargeError(maxBytes: number): ServiceError {
  return errors.tooLarge(`body exceeds the object byte limit of ${maxBytes} bytes`);
}
