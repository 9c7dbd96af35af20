/** The answer to a GET or HEAD of an object (docs/storage.md): its headers, a range, or 304. */
import { errors } from '../../shared/errors.ts';
import type { ReadResult } from '../domain/objects/read.ts';

/** The answer to a GET or HEAD of an object; a range past its end is thrown as the 416 error. */
export function renderRead(result: ReadResult): Response {
  const { row } = result;
  const headers = new Headers({
    'content-type': row.content_type,
    etag: `"${row.etag}"`,
    'x-svc-object-id': row.id,
    'last-modified': new Date(row.updated_at).toUTCString(),
    'accept-ranges': 'bytes',
    'cache-control': 'private, no-cache',
    // Bytes of any type are served from the API origin: never sniffed, never active content.
    'x-content-type-options': 'nosniff',
    'content-security-policy': "default-src 'none'; sandbox",
  });
  if (result.kind === 'not-modified') return new Response(null, { status: 304, headers });
  // The documented 416 variant of invalid_request (docs/api.md "Errors"), with the object's headers.
  if (result.kind === 'unsatisfiable') throw errors.rangeNotSatisfiable(row.size, Object.fromEntries(headers));
  const { range, bytes } = result;
  const status = range ? 206 : 200;
  if (range) headers.set('content-range', `bytes ${range.start}-${range.end}/${row.size}`);
  if (!bytes) {
    headers.set('content-length', String(range ? range.end - range.start + 1 : row.size));
    return new Response(null, { status, headers });
  }
  headers.set('content-length', String(bytes.length));
  return new Response(withLength(bytes.body, bytes.length), { status, headers });
}

/** A body of exactly `length` bytes; workerd sends a declared length only through FixedLengthStream. */
function withLength(body: ReadableStream<Uint8Array>, length: number): ReadableStream<Uint8Array> {
  const Fixed = (globalThis as { FixedLengthStream?: new (n: number) => TransformStream<Uint8Array, Uint8Array> }).FixedLengthStream;
  return Fixed ? body.pipeThrough(new Fixed(length)) : body;
}
