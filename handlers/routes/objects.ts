/**
 * Routes: object bytes, lists and deletion (the interface contract "PUT/GET/DELETE
 * storage/objects"; docs/storage.md). Bytes never sit in memory: a PUT body is piped through the
 * byte limit into the blob store, a GET answers the store's stream. A GET or HEAD is authorized by
 * the owner's session or by a signed URL (docs/storage.md "Signed URLs").
 */
import type { IRequest } from 'itty-router';
import { tooLargeError } from '../../shared/blobs/limit.ts';
import { objectView } from '../../shared/db/storage.ts';
import { errorResponse, errors } from '../../shared/errors.ts';
import { answerWhileDraining } from '../../shared/http/linger.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import {
  bucketNameSchema,
  contentTypeSchema,
  deleteObjectRequestSchema,
  listObjectsQuerySchema,
  objectKeySchema,
  objectReadQuerySchema,
} from '../../shared/schemas/storage.ts';
import { parseOr400 } from '../../shared/validation.ts';
import { presentedSession, requireOwnedProject } from '../auth.ts';
import type { Ctx, Routes } from '../context.ts';
import { objectsPage } from '../domain/objects/buckets.ts';
import type { ObjectAccess } from '../domain/objects/catalog.ts';
import { putPrecondition } from '../domain/objects/conditions.ts';
import { deleteObject } from '../domain/objects/delete.ts';
import { putObject, type PutInput } from '../domain/objects/put.ts';
import { readObject, type ReadResult } from '../domain/objects/read.ts';
import { SIGNED_URL_PARAMS } from '../domain/objects/signed-urls.ts';
import { checkSignedDownload } from '../domain/objects/tickets.ts';
import { json, noBody, noInput, noQuery, pathParam, queryOf, readJson } from '../http.ts';

/** Registers the object routes. */
export function register(router: Routes): void {
  router.put('/v0/projects/:id/storage/objects/:bucket/:key+', async (request, ctx) => {
    // Every refusal before the body is consumed is answered while the body is drained; a body
    // already handed to a store is that store's to finish.
    let input: PutInput;
    try {
      input = await parsePut(request, ctx);
    } catch (err) {
      return refuse(request, ctx, err);
    }
    const result = await putObject(ctx.deps, input);
    if (result.kind === 'refused') return refuse(request, ctx, result.error);
    return json(objectView(result.row), result.replaced ? 200 : 201);
  });

  const read = async (request: IRequest, ctx: Ctx, withBody: boolean): Promise<Response> => {
    const url = new URL(request.url);
    // The credential first: a signed URL's query, else the session.
    const signed = SIGNED_URL_PARAMS.some((name) => url.searchParams.has(name));
    // A session's token is checked here; whether it still stands, in the catalog's own read.
    const access: ObjectAccess = signed ? await signedAccess(request, ctx, url) : { session: await presentedSession(request, ctx) };
    const projectId = pathParam(request.params.id, 'id', projectIdSchema);
    const bucket = pathParam(request.params.bucket, 'bucket', bucketNameSchema);
    const key = pathParam(request.params.key, 'key', objectKeySchema);
    queryOf(url, objectReadQuerySchema);
    await noBody(request);
    const result = await readObject(ctx.deps, {
      requestId: ctx.requestId,
      access,
      projectId,
      bucket,
      key,
      withBody,
      ifNoneMatch: request.headers.get('if-none-match'),
      ifModifiedSince: request.headers.get('if-modified-since'),
      range: request.headers.get('range'),
      ifRange: request.headers.get('if-range'),
      signal: request.signal,
    });
    return renderRead(result);
  };

  router.get('/v0/projects/:id/storage/objects/:bucket/:key+', (request, ctx) => read(request, ctx, true));
  router.head('/v0/projects/:id/storage/objects/:bucket/:key+', (request, ctx) => read(request, ctx, false));

  // The contract's DELETE takes a JSON body; this form names the object in the path, as S3 and R2
  // do. Same rules, same receipt, same answer: one domain call.
  router.delete('/v0/projects/:id/storage/objects/:bucket/:key+', async (request, ctx) => {
    const { accountId, project } = await requireOwnedProject(request, ctx);
    const bucket = pathParam(request.params.bucket, 'bucket', bucketNameSchema);
    const key = pathParam(request.params.key, 'key', objectKeySchema);
    await noInput(request);
    const row = await deleteObject(ctx.deps, { requestId: ctx.requestId, accountId, project, bucket, key });
    return json(objectView(row));
  });

  // `…/objects/{bucket}/` with no key: say what is missing rather than "no route".
  for (const method of ['put', 'get', 'head', 'delete'] as const) {
    router[method]('/v0/projects/:id/storage/objects/:bucket', async (request, ctx) => {
      await requireOwnedProject(request, ctx);
      pathParam(request.params.bucket, 'bucket', bucketNameSchema);
      throw errors.invalid('key: must be 1 to 1024 characters');
    });
  }

  router.get('/v0/projects/:id/storage/objects', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const query = queryOf(new URL(request.url), listObjectsQuerySchema);
    await noBody(request);
    const page = await objectsPage(ctx.deps, project.id, query.bucket, query);
    const objects = page.items.flatMap((e) => (e.kind === 'object' ? [objectView(e.record)] : []));
    const commonPrefixes = page.items.flatMap((e) => (e.kind === 'prefix' ? [e.prefix] : []));
    return json({ bucket: query.bucket, objects, common_prefixes: commonPrefixes, next_cursor: page.next_cursor });
  });

  router.delete('/v0/projects/:id/storage/objects', async (request, ctx) => {
    const { accountId, project } = await requireOwnedProject(request, ctx);
    const body = await readJson(request, deleteObjectRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    const row = await deleteObject(ctx.deps, { requestId: ctx.requestId, accountId, project, bucket: body.bucket, key: body.key });
    return json(objectView(row));
  });
}

/** The PUT's input, checked in the order the contract's refusals are answered; none reads the body. */
async function parsePut(request: IRequest, ctx: Ctx): Promise<PutInput> {
  // The token here; whether the session still stands, in the catalog's own read (docs/api.md "Sessions").
  const session = await presentedSession(request, ctx);
  const projectId = pathParam(request.params.id, 'id', projectIdSchema);
  const bucket = pathParam(request.params.bucket, 'bucket', bucketNameSchema);
  const key = pathParam(request.params.key, 'key', objectKeySchema);
  // The body is the object's bytes; nothing else is input (docs/api.md "Decisions").
  noQuery(new URL(request.url));
  const maxBytes = ctx.deps.settings.SVCD_STORAGE_MAX_BYTES;
  const length = declaredLength(request);
  // Refused before a byte is read or anything is written (contract "Limits").
  if (length !== null && length > maxBytes) throw tooLargeError(maxBytes);
  const rawType = request.headers.get('content-type');
  const contentType = rawType === null ? null : parseOr400(contentTypeSchema, rawType, 'content-type');
  const precondition = putPrecondition(request.headers.get('if-match'), request.headers.get('if-none-match'));
  return {
    requestId: ctx.requestId,
    session,
    projectId,
    bucket,
    key,
    contentType,
    length,
    precondition,
    body: request.body,
    signal: request.signal,
    afterAnswer: (task) => ctx.afterAnswer(task),
  };
}

/**
 * The access a signed URL grants (docs/storage.md "Signed URLs"): checked against the object the
 * path names, before anything else about the request. It is the request's one credential: an
 * `Authorization` header beside it is 401, as two credentials are.
 */
async function signedAccess(request: IRequest, ctx: Ctx, url: URL): Promise<ObjectAccess> {
  if (request.headers.has('authorization')) throw errors.unauthenticated('a signed URL is a credential of its own: send it without an Authorization header');
  const one = (name: string): string | null => {
    const values = url.searchParams.getAll(name);
    if (values.length > 1) throw errors.unauthenticated(`the signed URL is not valid: ${name} given ${values.length} times`);
    return values[0] ?? null;
  };
  let named: { projectId: string; bucket: string; key: string };
  try {
    named = { projectId: decodeURIComponent(request.params.id ?? ''), bucket: decodeURIComponent(request.params.bucket ?? ''), key: decodeURIComponent(request.params.key ?? '') };
  } catch {
    // Not a path any ticket named.
    throw errors.unauthenticated('the signed URL is not valid');
  }
  await checkSignedDownload(ctx.deps, { ...named, expires: one('expires'), signature: one('signature') });
  return { signed: true };
}

/**
 * Answers a refusal of a PUT: while reading and discarding its body when nothing has read it yet
 * (shared/http/linger.ts), else as any error.
 */
function refuse(request: Request, ctx: Ctx, err: unknown): Response {
  if (request.body && !request.bodyUsed && !request.body.locked) {
    return answerWhileDraining(errorResponse(err, ctx.requestId, ctx.deps.log), request.body);
  }
  throw err;
}

/** The request's `Content-Length`, or null when it streams without one; a malformed one is 400. */
function declaredLength(request: Request): number | null {
  const raw = request.headers.get('content-length');
  if (raw === null) return null;
  if (!/^\d{1,16}$/.test(raw.trim())) throw errors.invalid('content-length: must be a non-negative integer');
  return Number(raw.trim());
}

/** The answer to a GET or HEAD of an object; a range past its end is thrown as the 416 error. */
function renderRead(result: ReadResult): Response {
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
