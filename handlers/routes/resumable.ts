/**
 * Routes: resumable uploads, TUS 1.0.0 (https://tus.io/protocols/resumable-upload; docs/storage.md
 * "Resumable uploads"; declared in shared/api/resumable.ts). This module reads and answers the
 * protocol's headers; the rules are handlers/domain/objects/resumable.ts's. Every answer carries
 * `Tus-Resumable`, errors included.
 */
import { storage } from '../../shared/api/index.ts';
import type { SessionClaims } from '../../shared/auth.ts';
import { tooLargeError } from '../../shared/blobs/limit.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import { bucketNameSchema, contentTypeSchema, DEFAULT_CONTENT_TYPE, objectKeySchema } from '../../shared/schemas/storage.ts';
import { MetadataError, parseUploadMetadata, TUS_CONTENT_TYPE, TUS_EXTENSIONS, TUS_VERSION } from '../../shared/schemas/resumable.ts';
import { parseOr400 } from '../../shared/validation.ts';
import { presentedSession } from '../auth.ts';
import type { Ctx } from '../context.ts';
import { appendResumable, createResumable, resumableState, terminateResumable, type NewUpload, type UploadBody, type UploadCall, type UploadState } from '../domain/objects/resumable.ts';
import { declaredLength } from '../http.ts';
import { implement, type Implementation, type Routed } from '../implement.ts';

/** The protocol version on every answer. */
const TUS = { 'tus-resumable': TUS_VERSION };

// The token here; whether the session still stands, in the upload's own read (docs/api.md "Sessions").
const tusSession = (request: Routed, ctx: Ctx) => presentedSession(request, ctx);

/** The protocol version the request must speak, after the path and query (400 otherwise: the error table has no 412). */
function requireTus(request: Routed): void {
  if (request.headers.get('tus-resumable') !== TUS_VERSION) throw errors.invalid(`Tus-Resumable: must be ${TUS_VERSION}`);
}

const callOf = (ctx: Ctx, session: SessionClaims, projectId: string): UploadCall => ({
  requestId: ctx.requestId,
  session,
  projectId,
  afterAnswer: (task) => ctx.afterAnswer(task),
});

/** A non-negative decimal header (TUS's offsets and lengths). */
function decimal(request: Routed, name: string): number | null {
  const raw = request.headers.get(name);
  if (raw === null) return null;
  if (!/^\d{1,16}$/.test(raw.trim())) throw errors.invalid(`${name}: must be a non-negative integer`);
  return Number(raw.trim());
}

/**
 * The bytes a POST or PATCH carries: `application/offset+octet-stream` with a `Content-Length` of
 * at most one request's limit (413 before a byte is read); null for a POST without any.
 */
function tusBody(request: Routed, ctx: Ctx, required: boolean): UploadBody | null {
  const length = declaredLength(request);
  const type = request.headers.get('content-type');
  if (!required && (length === null || length === 0) && type === null) return null;
  if (type?.split(';')[0]?.trim().toLowerCase() !== TUS_CONTENT_TYPE) throw errors.invalid(`content-type: must be ${TUS_CONTENT_TYPE}`);
  if (length === null) throw errors.invalid('content-length: is required (each request carries a known number of bytes)');
  const max = ctx.deps.settings.SVCD_STORAGE_MAX_BYTES;
  if (length > max) throw tooLargeError(max);
  return { body: request.body ?? new ReadableStream({ start: (c) => c.close() }), length, signal: request.signal };
}

/** What `Upload-Length` and `Upload-Metadata` ask for. */
function newUpload(request: Routed): NewUpload {
  if (request.headers.has('upload-defer-length')) throw errors.invalid('Upload-Defer-Length: not supported; send Upload-Length');
  const length = decimal(request, 'upload-length');
  if (length === null) throw errors.invalid('Upload-Length: is required');
  const raw = request.headers.get('upload-metadata');
  let meta: Map<string, string>;
  try {
    meta = parseUploadMetadata(raw);
  } catch (err) {
    if (err instanceof MetadataError) throw errors.invalid(`Upload-Metadata: ${err.message}`);
    throw err;
  }
  // Uppy and tus-js-client name a file `filename`/`filetype` (or `name`/`type`) unless told otherwise.
  const first = (...names: string[]) => names.map((n) => meta.get(n)).find((v) => v !== undefined && v !== '');
  const bucket = first('bucket');
  const key = first('key', 'filename', 'name');
  if (bucket === undefined) throw errors.invalid('Upload-Metadata: bucket is required');
  if (key === undefined) throw errors.invalid('Upload-Metadata: key is required');
  const type = first('content_type', 'filetype', 'type');
  return {
    bucket: parseOr400(bucketNameSchema, bucket, 'bucket'),
    key: parseOr400(objectKeySchema, key, 'key'),
    contentType: type === undefined ? DEFAULT_CONTENT_TYPE : parseOr400(contentTypeSchema, type, 'content_type'),
    length,
    metadata: raw ?? '',
  };
}

const expiresOf = (state: UploadState) => new Date(state.expiresAt).toUTCString();

/** An answer without a body, with the protocol's headers. */
const answer = (status: number, headers: Record<string, string> = {}) => new Response(null, { status, headers: { ...TUS, ...headers } });

/** Checks the protocol version first; errors carry `Tus-Resumable` and `Tus-Version` too. */
const tus =
  <A extends [{ request: Routed }, ...unknown[]]>(serve: (...args: A) => Promise<Response>) =>
  async (...args: A): Promise<Response> => {
    try {
      requireTus(args[0].request);
      return await serve(...args);
    } catch (err) {
      if (err instanceof ServiceError) Object.assign(err, { headers: { ...err.headers, ...TUS, 'tus-version': TUS_VERSION } });
      throw err;
    }
  };

export const implementations: Implementation[] = [
  implement(storage.resumableOptions, async (_call, ctx) =>
    answer(204, { 'tus-version': TUS_VERSION, 'tus-extension': TUS_EXTENSIONS, 'tus-max-size': String(ctx.deps.settings.SVCD_STORAGE_MAX_OBJECT_BYTES) }),
  ),

  implement(
    storage.createResumable,
    tusSession,
    tus(async ({ caller, params, request }, ctx) => {
      const upload = newUpload(request);
      const first = tusBody(request, ctx, false);
      const state = await createResumable(ctx.deps, callOf(ctx, caller, params.id), upload, first);
      return answer(201, {
        location: `/v0/projects/${params.id}/storage/resumable/${state.uploadId}`,
        'upload-offset': String(state.offset),
        'upload-expires': expiresOf(state),
      });
    }),
  ),

  implement(
    storage.headResumable,
    tusSession,
    tus(async ({ caller, params }, ctx) => {
      const state = await resumableState(ctx.deps, callOf(ctx, caller, params.id), params.upload);
      return answer(200, {
        'upload-offset': String(state.offset),
        'upload-length': String(state.length),
        ...(state.metadata ? { 'upload-metadata': state.metadata } : {}),
        'upload-expires': expiresOf(state),
        'cache-control': 'no-store',
      });
    }),
  ),

  implement(
    storage.patchResumable,
    tusSession,
    tus(async ({ caller, params, request }, ctx) => {
      const offset = decimal(request, 'upload-offset');
      if (offset === null) throw errors.invalid('Upload-Offset: is required');
      const body = tusBody(request, ctx, true)!;
      const state = await appendResumable(ctx.deps, callOf(ctx, caller, params.id), params.upload, offset, body);
      return answer(204, { 'upload-offset': String(state.offset), 'upload-expires': expiresOf(state) });
    }),
  ),

  implement(
    storage.deleteResumable,
    tusSession,
    tus(async ({ caller, params }, ctx) => {
      await terminateResumable(ctx.deps, callOf(ctx, caller, params.id), params.upload);
      return answer(204);
    }),
  ),
];
