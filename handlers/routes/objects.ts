/**
 * Routes: object bytes, lists and deletion (the interface contract "PUT/GET/DELETE
 * storage/objects"; docs/storage.md; declared in shared/api/storage.ts). Bytes never sit in memory:
 * a PUT body is piped through the byte limit into the blob store, a GET answers the store's stream.
 * A GET or HEAD is authorized by the owner's session or by a signed URL (docs/storage.md "Signed URLs").
 */
import { storage, type ParamsOf } from '../../shared/api/index.ts';
import { tooLargeError } from '../../shared/blobs/limit.ts';
import { objectView } from '../../shared/db/storage.ts';
import { errors } from '../../shared/errors.ts';
import { contentTypeSchema } from '../../shared/schemas/storage.ts';
import { parseOr400 } from '../../shared/validation.ts';
import { presentedSession, requireOwnedProject } from '../auth.ts';
import type { Ctx } from '../context.ts';
import { objectsPage } from '../domain/objects/buckets.ts';
import type { ObjectAccess } from '../domain/objects/catalog.ts';
import { putPrecondition } from '../domain/objects/conditions.ts';
import { deleteObject } from '../domain/objects/delete.ts';
import { putObject } from '../domain/objects/put.ts';
import { readObject } from '../domain/objects/read.ts';
import { SIGNED_URL_PARAMS } from '../domain/objects/signed-urls.ts';
import { checkSignedDownload } from '../domain/objects/tickets.ts';
import { declaredLength, json } from '../http.ts';
import { implement, type Implementation, type Routed } from '../implement.ts';
import { renderRead } from './object-read.ts';

// The token here; whether the session still stands, in the catalog's own read (docs/api.md "Sessions").
const session = (request: Routed, ctx: Ctx) => presentedSession(request, ctx);

/** GET and HEAD: the same rules, with or without the bytes. */
const read = (withBody: boolean) => async ({ caller: access, params, request }: { caller: ObjectAccess; params: ParamsOf<typeof storage.getObject>; request: Routed }, ctx: Ctx) =>
  renderRead(
    await readObject(ctx.deps, {
      requestId: ctx.requestId,
      access,
      projectId: params.id,
      bucket: params.bucket,
      key: params.key,
      withBody,
      ifNoneMatch: request.headers.get('if-none-match'),
      ifModifiedSince: request.headers.get('if-modified-since'),
      range: request.headers.get('range'),
      ifRange: request.headers.get('if-range'),
      signal: request.signal,
    }),
  );

export const implementations: Implementation[] = [
  // Checked in the order the contract's refusals are answered, none reading the body; a refusal
  // before the body is consumed is answered while it is drained (handlers/implement.ts), and a body
  // already handed to a store is that store's to finish.
  implement(storage.putObject, session, async ({ caller, params, request }, ctx) => {
    const maxBytes = ctx.deps.settings.SVCD_STORAGE_MAX_BYTES;
    const length = declaredLength(request);
    // Refused before a byte is read or anything is written (contract "Limits").
    if (length !== null && length > maxBytes) throw tooLargeError(maxBytes);
    const rawType = request.headers.get('content-type');
    const contentType = rawType === null ? null : parseOr400(contentTypeSchema, rawType, 'content-type');
    const precondition = putPrecondition(request.headers.get('if-match'), request.headers.get('if-none-match'));
    const result = await putObject(ctx.deps, {
      requestId: ctx.requestId,
      session: caller,
      projectId: params.id,
      bucket: params.bucket,
      key: params.key,
      contentType,
      length,
      precondition,
      body: request.body,
      signal: request.signal,
      afterAnswer: (task) => ctx.afterAnswer(task),
    });
    if (result.kind === 'refused') throw result.error;
    return json(objectView(result.row), result.replaced ? 200 : 201);
  }),

  implement(storage.getObject, objectAccess, read(true)),
  implement(storage.headObject, objectAccess, read(false)),

  // The contract's DELETE takes a JSON body; this form names the object in the path, as S3 and R2
  // do. Same rules, same receipt, same answer: one domain call.
  implement(storage.deleteObjectByPath, requireOwnedProject, async ({ caller: { accountId, project }, params }, ctx) =>
    json(objectView(await deleteObject(ctx.deps, { requestId: ctx.requestId, accountId, project, bucket: params.bucket, key: params.key }))),
  ),

  // `…/objects/{bucket}/` with no key: say what is missing rather than "no route".
  ...storage.noKeyRoutes.map((route) =>
    implement(route, requireOwnedProject, () => {
      throw errors.invalid('key: must be 1 to 1024 characters');
    }),
  ),

  implement(storage.listObjects, requireOwnedProject, async ({ caller, query }, ctx) => {
    const page = await objectsPage(ctx.deps, caller.project.id, query.bucket, query);
    const objects = page.items.flatMap((e) => (e.kind === 'object' ? [objectView(e.record)] : []));
    const commonPrefixes = page.items.flatMap((e) => (e.kind === 'prefix' ? [e.prefix] : []));
    return json({ bucket: query.bucket, objects, common_prefixes: commonPrefixes, next_cursor: page.next_cursor });
  }),

  implement(storage.deleteObject, requireOwnedProject, async ({ caller: { accountId, project }, body }, ctx) =>
    json(objectView(await deleteObject(ctx.deps, { requestId: ctx.requestId, accountId, project, bucket: body.bucket, key: body.key }))),
  ),
];

/** The credential of a read: a signed URL's query, else the session (whose standing the catalog's read judges). */
async function objectAccess(request: Routed, ctx: Ctx): Promise<ObjectAccess> {
  const url = new URL(request.url);
  const signed = SIGNED_URL_PARAMS.some((name) => url.searchParams.has(name));
  return signed ? signedAccess(request, ctx, url) : { session: await presentedSession(request, ctx) };
}

/**
 * The access a signed URL grants (docs/storage.md "Signed URLs"): checked against the object the
 * path names, before anything else about the request. It is the request's one credential: an
 * `Authorization` header beside it is 401, as two credentials are.
 */
async function signedAccess(request: Routed, ctx: Ctx, url: URL): Promise<ObjectAccess> {
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
