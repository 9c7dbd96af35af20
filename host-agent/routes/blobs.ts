/**
 * Internal routes of the `fs` blob backend (docs/storage.md): the handlers stream object bytes in and out
 * of this agent's blob files. Bodies are raw bytes, never JSON, and never buffered.
 *
 *   PUT    /internal/v1/blobs/:project/:name   body = bytes; x-svc-max-bytes, x-svc-length → 201 {size, etag}
 *   GET    /internal/v1/blobs/:project/:name   optional `range: bytes=a-b` → 200/206 bytes, x-svc-size
 *   DELETE /internal/v1/blobs/:project/:name   → 200 {deleted}
 *
 * `:project` and `:name` are checked against their fixed patterns by the store before any file is
 * touched; object keys never reach the agent.
 */
import { INTERNAL_BLOB_HEADERS } from '../../shared/blobs/agent.ts';
import { errorResponse, errors } from '../../shared/errors.ts';
import { newRequestId } from '../../shared/ids.ts';
import { internalPaths, ROUTE_PARAMS } from '../../shared/internal-paths.ts';
import { answerWhileDraining } from '../../shared/http/linger.ts';
import { nodeWrittenResponse } from '../../shared/http/node-http.ts';
import { RangeNotSatisfiableError } from '../blobs/fs-store.ts';
import { json } from '../../shared/http/body.ts';
import type { InternalRouter } from '../internal-api.ts';
import { intHeader, requiredIntHeader } from './headers.ts';

const BLOB_ROUTE = internalPaths.blob(ROUTE_PARAMS.project, ROUTE_PARAMS.name);

/** Registers the blob routes. */
export function register(router: InternalRouter): void {
  router.put(BLOB_ROUTE, async (request, ctx) => {
    const maxBytes = requiredIntHeader(request.headers, INTERNAL_BLOB_HEADERS.maxBytes);
    const length = intHeader(request.headers, INTERNAL_BLOB_HEADERS.length);
    const body = request.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
    try {
      // The body comes from this agent's HTTP server (shared/http/node-http.ts), whose chunks are the
      // parser's own, which nothing else reads once handed over: the store may release each once
      // it has copied it. The request's signal ends the write when the caller goes.
      const written = await ctx.blobs.put(request.params.project!, request.params.name!, body, { maxBytes, length, ownsChunks: true, signal: request.signal });
      ctx.metrics.blobWritten(written.size);
      return json(written, 201);
    } catch (err) {
      // Refused before the body ended (413): the rest of it is still on the connection. It is read
      // and discarded while the answer goes out (closing with it unread would reset the connection,
      // and the caller could lose the 413), and the connection is closed after the answer, or the
      // caller's pool would queue its next request behind it.
      const response = errorResponse(err, request.headers.get('x-request-id') ?? newRequestId(), ctx.log);
      response.headers.set('connection', 'close');
      return answerWhileDraining(response, request.body);
    }
  });

  router.get(BLOB_ROUTE, async (request, ctx) => {
    const rawRange = request.headers.get('range');
    let wanted: { start: number; end: number } | undefined;
    if (rawRange !== null) {
      // The handlers resolve the client's Range against the catalog; only `bytes=a-b` reaches here.
      const m = /^bytes=(\d{1,15})-(\d{1,15})$/.exec(rawRange);
      if (!m) throw errors.invalid('range: must be bytes=<first>-<last>');
      wanted = { start: Number(m[1]), end: Number(m[2]) };
    }
    let read;
    try {
      read = await ctx.blobs.open(
        request.params.project!,
        request.params.name!,
        wanted ? (size) => (wanted.start <= wanted.end && wanted.end < size ? wanted : null) : undefined,
      );
    } catch (err) {
      if (err instanceof RangeNotSatisfiableError) throw errors.invalid(`range: outside the blob's ${err.size} bytes`);
      throw err;
    }
    if (!read) throw errors.notFound('no such blob');
    const headers = {
      'content-type': 'application/octet-stream',
      'content-length': String(read.length),
      [INTERNAL_BLOB_HEADERS.size]: String(read.size),
    };
    // Written by the listener on two reused buffers (shared/http/node-http.ts): a 32 MiB read
    // allocates nothing per chunk, so it costs the garbage collector nothing (docs/storage.md).
    // The web stream is there for any other reader, and is only opened when pulled.
    let opened: ReadableStreamDefaultReader<Uint8Array> | undefined;
    const fallback = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          const { done, value } = await (opened ??= read.body.getReader()).read();
          if (done) controller.close();
          else controller.enqueue(value);
        },
        cancel: (reason) => (opened ?? read.body.getReader()).cancel(reason),
      },
      { highWaterMark: 0 },
    );
    return nodeWrittenResponse(wanted ? 206 : 200, headers, (res) => read.writeTo(res), fallback);
  });

  router.delete(BLOB_ROUTE, async (request, ctx) => {
    const deleted = await ctx.blobs.delete(request.params.project!, request.params.name!);
    return json({ deleted });
  });
}
