/**
 * Internal routes of resumable uploads on the `fs` backend (docs/storage.md "Resumable uploads"):
 *
 *   PATCH  /internal/v1/uploads/:project/:upload          body = bytes; x-svc-offset, x-svc-length → 200 {offset}
 *   POST   /internal/v1/uploads/:project/:upload/finish   x-svc-name (the blob), x-svc-length → 200 {size, etag}
 *   DELETE /internal/v1/uploads/:project/:upload          → 200 {deleted}
 *
 * The handlers decide the offset (from the upload's record) and record the answer; the files are
 * host-agent/blobs/resumable.ts's.
 */
import { RESUMABLE_HEADERS } from '../../shared/blobs/multipart.ts';
import { errorResponse, errors } from '../../shared/errors.ts';
import { json } from '../../shared/http/body.ts';
import { answerWhileDraining } from '../../shared/http/linger.ts';
import { newRequestId } from '../../shared/ids.ts';
import { internalPaths, ROUTE_PARAMS } from '../../shared/internal-paths.ts';
import { resumableFilesOf } from '../blobs/resumable.ts';
import type { InternalRouter } from '../internal-api.ts';
import { requiredIntHeader } from './headers.ts';

const UPLOAD_ROUTE = internalPaths.upload(ROUTE_PARAMS.project, ROUTE_PARAMS.upload);
const FINISH_ROUTE = internalPaths.uploadFinish(ROUTE_PARAMS.project, ROUTE_PARAMS.upload);

/** Registers the resumable upload routes. */
export function register(router: InternalRouter): void {
  router.patch(UPLOAD_ROUTE, async (request, ctx) => {
    try {
      const offset = requiredIntHeader(request.headers, RESUMABLE_HEADERS.offset);
      const length = requiredIntHeader(request.headers, RESUMABLE_HEADERS.length);
      const body = request.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
      const next = await resumableFilesOf(ctx.blobs).append(request.params.project!, request.params.upload!, offset, length, body, request.signal);
      ctx.metrics.blobWritten(length);
      return json({ offset: next });
    } catch (err) {
      // As a blob write refused before its body ended: drained while answered, then closed.
      const response = errorResponse(err, request.headers.get('x-request-id') ?? newRequestId(), ctx.log);
      response.headers.set('connection', 'close');
      return answerWhileDraining(response, request.body);
    }
  });

  router.post(FINISH_ROUTE, async (request, ctx) => {
    const name = request.headers.get(RESUMABLE_HEADERS.name);
    if (name === null) throw errors.invalid(`${RESUMABLE_HEADERS.name}: is required`);
    const length = requiredIntHeader(request.headers, RESUMABLE_HEADERS.length);
    return json(await resumableFilesOf(ctx.blobs).finish(request.params.project!, request.params.upload!, name, length));
  });

  router.delete(UPLOAD_ROUTE, async (request, ctx) => json({ deleted: await resumableFilesOf(ctx.blobs).remove(request.params.project!, request.params.upload!) }));
}
