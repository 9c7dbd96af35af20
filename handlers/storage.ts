/**
 * Routes: object storage (contract "PUT/GET storage/buckets", "POST storage/uploads|downloads",
 * "PUT/GET/DELETE storage/objects"; DESIGN §3 Object storage, Receipts). docs/storage.md has the
 * decisions the contract leaves open.
 *
 * Bytes never sit in memory: a PUT body is piped through the byte limit into the blob store, a GET
 * answers the store's stream. Nothing is lost: every PUT writes a new immutable blob, then flips the
 * catalog row to it with a conditional write (re-reading and retrying when another writer got there
 * first), and only then deletes the blob the row used to point at (after answering). A failure
 * before the flip removes the new blob; a crash leaves at most an unreferenced blob, never a row
 * without its bytes.
 */
import type { IRequest } from 'itty-router';
import { z } from 'zod';
import { agentBlobStore } from '../shared/blobs/agent.ts';
import { tooLargeError } from '../shared/blobs/limit.ts';
import { blobName, newWriteId } from '../shared/blobs/names.ts';
import { s3BlobStore } from '../shared/blobs/s3.ts';
import type { BlobBackend, BlobBytes, BlobStore, BlobWritten, ByteRange } from '../shared/blobs/store.ts';
import type { ProjectRecord } from '../shared/db/projects.ts';
import { newReceipt } from '../shared/db/receipts.ts';
import {
  commitObject,
  createBucket,
  getBucket,
  getObject,
  getProjectBucketObject,
  listBuckets,
  listObjects,
  objectView,
  removeObject,
  reserveObject,
  type BucketRecord,
  type ObjectRecord,
} from '../shared/db/storage.ts';
import { ServiceError, errorResponse, errors } from '../shared/errors.ts';
import { answerWhileDraining } from '../shared/http/linger.ts';
import { newId } from '../shared/ids.ts';
import { pageQuerySchema, projectIdSchema } from '../shared/schemas.ts';
import { parseOr400 } from '../shared/validation.ts';
import { nowIso } from '../shared/time.ts';
import { requireOwnedProject, requireSession } from './auth.ts';
import type { Ctx, Routes } from './context.ts';
import { json, listPage, noBody, noInput, noQuery, pathParam, queryOf, readJson } from './http.ts';
import { agentFor, rememberedAgent } from './domain/placement.ts';

// ---------------------------------------------------------------------------------------------
// Inputs (contract "Bucket record", "Object catalog row", "Limits")

/** Bucket name: S3-compatible, the same on every backend. */
export const bucketNameSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/, 'must match ^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$');

/**
 * Object key: 1 to 1024 characters (Unicode code points), any of them, but well-formed Unicode and
 * not `.` or `..` alone: no URL can carry those as a path segment (clients collapse them, even
 * percent-encoded), so such an object could never be uploaded or read.
 */
export const objectKeySchema = z
  .string()
  .min(1, 'must be 1 to 1024 characters')
  .refine((k) => !/[\uD800-\uDFFF]/u.test(k), 'must be valid Unicode (no lone surrogate)')
  .refine((k) => codePoints(k) <= 1024, 'must be at most 1024 characters')
  .refine((k) => k !== '.' && k !== '..', 'must not be "." or ".."');

/** A content type: 1 to 255 characters that can travel in a header (visible ASCII, space, tab). */
export const contentTypeSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(255, 'must be at most 255 characters')
  .regex(/^[\x21-\x7e][\t\x20-\x7e]*$/, 'must be printable ASCII');

export const uploadTicketRequestSchema = z.strictObject({
  bucket: bucketNameSchema,
  key: objectKeySchema,
  content_type: contentTypeSchema.nullable().optional(),
});

export const downloadTicketRequestSchema = z.strictObject({ bucket: bucketNameSchema, key: objectKeySchema });

export const deleteObjectRequestSchema = z.strictObject({ bucket: bucketNameSchema, key: objectKeySchema });

const listObjectsQuerySchema = pageQuerySchema.extend({ bucket: bucketNameSchema });

const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

/**
 * The path of an object on the service origin. Each segment is percent-encoded and `/` kept, as the
 * contract shows; a key with a `.` or `..` segment has its `/` encoded too, since clients collapse
 * dot segments (`a/../b` would otherwise reach `b`).
 */
export function objectPath(projectId: string, bucket: string, key: string): string {
  const segments = key.split('/');
  const encoded = segments.some((s) => s === '.' || s === '..')
    ? encodeURIComponent(key)
    : segments.map(encodeURIComponent).join('/');
  return `/v0/projects/${projectId}/storage/objects/${bucket}/${encoded}`;
}

function bucketView(b: BucketRecord) {
  return { project: b.project, name: b.name, created_at: b.created_at };
}

// ---------------------------------------------------------------------------------------------
// Blob stores

/** The store holding a row's bytes: `s3` from settings, `fs` on the project's host agent. */
async function storeFor(ctx: Ctx, project: ProjectRecord, backend: BlobBackend): Promise<BlobStore> {
  if (backend === 's3') return s3BlobStore(ctx.deps.settings);
  // A record of the agent read in the last seconds will do (handlers/domain/placement.ts): the byte
  // routes then make one DynamoDB round trip less.
  const agent = await storageAgent(ctx, project, true);
  let unreachable = false;
  const first = agentBlobStore(ctx.deps.agents, agent, ctx.requestId, () => {
    unreachable = true;
    ctx.deps.placement.forgetAgent(agent.agent_id);
  });
  // When the agent could not be reached, read its record again before answering: if it now
  // registers another address, try that once. Not for a PUT: its body may be partly sent already.
  const again = async <T>(call: (store: BlobStore) => Promise<T>): Promise<T> => {
    try {
      return await call(first);
    } catch (err) {
      if (!unreachable) throw err;
      const fresh = await storageAgent(ctx, project, false);
      if (fresh.internal_url === agent.internal_url) {
        // Still registered where it did not answer: remember nothing of it.
        ctx.deps.placement.forgetAgent(agent.agent_id);
        throw err;
      }
      return call(agentBlobStore(ctx.deps.agents, fresh, ctx.requestId, () => ctx.deps.placement.forgetAgent(fresh.agent_id)));
    }
  };
  return {
    backend: 'fs',
    put: (projectId, name, input) => first.put(projectId, name, input),
    get: (projectId, name, range, signal) => again((store) => store.get(projectId, name, range, signal)),
    delete: (projectId, name) => again((store) => store.delete(projectId, name)),
  };
}

/** The project's live agent as the `fs` store: its absence is the storage upstream's (contract error list). */
async function storageAgent(ctx: Ctx, project: ProjectRecord, reuse: boolean) {
  try {
    return await agentFor(ctx.deps, project, undefined, { reuse });
  } catch (err) {
    if (err instanceof ServiceError && err.code === 'orchestrator_unavailable') throw errors.upstream(err.message);
    throw err;
  }
}

/**
 * Deletes a blob that nothing references any more; a failure leaves it unreferenced, and is logged
 * with what becomes of it: an fs blob is swept at its agent's next start, an S3 one is not swept
 * (docs/storage.md "Nothing lost").
 */
async function discardBlob(ctx: Ctx, project: ProjectRecord, backend: BlobBackend, name: string, store?: BlobStore): Promise<void> {
  try {
    await (store ?? (await storeFor(ctx, project, backend))).delete(project.id, name);
  } catch (err) {
    const fate = backend === 'fs' ? 'it will be swept at the next agent start' : 'S3 blobs are not swept: remove it from the bucket by hand';
    ctx.deps.log(`storage: request ${ctx.requestId}: ${backend} blob ${project.id}/${name}: blob removal failed; ${fate} (${(err as Error).message})`);
  }
}

/** Writes the PUT's body into a new blob of `store`; answers its name and what the store says of it. */
async function writeBlob(
  request: Request,
  store: BlobStore,
  projectId: string,
  bucket: string,
  key: string,
  { length, maxBytes }: { length: number | null; maxBytes: number },
  contentType: string | null | undefined,
): Promise<{ name: string; written: BlobWritten }> {
  const name = await blobName(projectId, bucket, key, newWriteId());
  const written = await store.put(projectId, name, {
    body: request.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() }),
    length,
    maxBytes,
    contentType: contentType ?? DEFAULT_CONTENT_TYPE,
    signal: request.signal,
  });
  return { name, written };
}

/**
 * The caller's project with one of its buckets and the row of `bucket/key` (when `key` is given),
 * read in one DynamoDB round trip (a batched read, not three calls) on the byte routes. The reads
 * have no effect, and nothing about the bucket or the row is used before ownership holds: a
 * stranger still gets 404 and learns nothing from them.
 */
async function ownedWith(
  ctx: Ctx,
  accountId: string,
  projectId: string,
  bucket: string,
  key: string | null,
): Promise<{ project: ProjectRecord; bucket: BucketRecord | null; object: ObjectRecord | null }> {
  const read = await getProjectBucketObject(ctx.deps.db, projectId, bucket, key);
  // As getOwnedProject: anything but the caller's own project is 404, never a hint that it exists.
  if (!read.project || read.project.owner !== accountId) throw errors.notFound(`project ${projectId} not found`);
  ctx.deps.placement.rememberOwner(projectId, accountId);
  return { project: read.project, bucket: read.bucket, object: read.object };
}

async function requireBucket(ctx: Ctx, projectId: string, bucket: string): Promise<BucketRecord> {
  const b = await getBucket(ctx.deps.db, projectId, bucket);
  if (!b) throw errors.notFound(`bucket ${bucket} not found`);
  return b;
}

function notFoundObject(bucket: string, key: string, pending = false): ServiceError {
  return errors.notFound(pending ? `object ${bucket}/${key} has no bytes yet (pending)` : `object ${bucket}/${key} not found`);
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Attempts at a conditional catalog change before giving up with 409 (each one re-reads the row). */
const FLIP_ATTEMPTS = 10;

// ---------------------------------------------------------------------------------------------
// Conditional GET and ranges (RFC 9110 §13.1.2, §14)

/** True when an `If-None-Match` value matches `etag` (weak comparison, `*` matches any). */
function noneMatch(header: string | null, etag: string): boolean {
  if (header === null) return false;
  if (header.trim() === '*') return true;
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === `"${etag}"`);
}

/**
 * Resolves a `Range` header against `size`: a range, 'unsatisfiable', or null to answer the whole
 * object (no header, another unit, several ranges, or a malformed one: RFC 9110 lets a server
 * ignore those).
 */
export function resolveRange(header: string | null, size: number): ByteRange | 'unsatisfiable' | null {
  if (header === null) return null;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!m) return null;
  const [, first, last] = m as unknown as [string, string, string];
  if (first === '' && last === '') return null;
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  if (last !== '' && Number(last) < start) return null;
  if (start >= size) return 'unsatisfiable';
  return { start, end };
}

/** A body of exactly `length` bytes; workerd sends a declared length only through FixedLengthStream. */
function withLength(body: ReadableStream<Uint8Array>, length: number): ReadableStream<Uint8Array> {
  const Fixed = (globalThis as { FixedLengthStream?: new (n: number) => TransformStream<Uint8Array, Uint8Array> }).FixedLengthStream;
  return Fixed ? body.pipeThrough(new Fixed(length)) : body;
}

// ---------------------------------------------------------------------------------------------
// Routes

/** Registers the storage routes. */
export function register(router: Routes): void {
  router.put('/v0/projects/:id/storage/buckets/:bucket', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const name = pathParam(request.params.bucket, 'bucket', bucketNameSchema);
    await noInput(request);
    const { bucket, created } = await createBucket(ctx.deps.db, { project: project.id, name, created_at: nowIso(ctx.deps.now()) });
    return json(bucketView(bucket), created ? 201 : 200);
  });

  router.get('/v0/projects/:id/storage/buckets', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await listPage(ctx, ['buckets', project.id], query, (limit, after) => listBuckets(ctx.deps.db, project.id, limit, after));
    return json({ buckets: page.items.map(bucketView), next_cursor: page.next_cursor });
  });

  router.post('/v0/projects/:id/storage/uploads', async (request, ctx) => {
    const { settings, db } = ctx.deps;
    const { project } = await requireOwnedProject(request, ctx);
    const body = await readJson(request, uploadTicketRequestSchema, settings.SVCD_JSON_MAX_BYTES);
    await requireBucket(ctx, project.id, body.bucket);
    const now = ctx.deps.now();
    const at = nowIso(now);
    // A ticket reserves a pending row; an existing row (pending or stored) is kept as it is, so a
    // ticket never hides bytes that are already readable.
    const { record } = await reserveObject(db, {
      id: newId('obj'),
      project: project.id,
      bucket: body.bucket,
      key: body.key,
      size: 0,
      etag: '',
      content_type: body.content_type ?? DEFAULT_CONTENT_TYPE,
      backend: settings.SVCD_BLOB_BACKEND,
      state: 'pending',
      created_at: at,
      updated_at: at,
      blob: null,
    });
    return json(
      {
        object_id: record.id,
        method: 'PUT',
        upload_url: objectPath(project.id, body.bucket, body.key),
        headers: { 'content-type': body.content_type ?? record.content_type },
        max_bytes: settings.SVCD_STORAGE_MAX_BYTES,
        expires_at: nowIso(now + settings.SVCD_TICKET_TTL_SECONDS * 1000),
      },
      201,
    );
  });

  router.post('/v0/projects/:id/storage/downloads', async (request, ctx) => {
    const { settings, db } = ctx.deps;
    const { project } = await requireOwnedProject(request, ctx);
    const body = await readJson(request, downloadTicketRequestSchema, settings.SVCD_JSON_MAX_BYTES);
    await requireBucket(ctx, project.id, body.bucket);
    const row = await getObject(db, project.id, body.bucket, body.key);
    if (!row) throw notFoundObject(body.bucket, body.key);
    if (row.state !== 'stored') throw notFoundObject(body.bucket, body.key, true);
    return json({
      method: 'GET',
      download_url: objectPath(project.id, body.bucket, body.key),
      headers: {},
      expires_at: nowIso(ctx.deps.now() + settings.SVCD_TICKET_TTL_SECONDS * 1000),
      object: objectView(row),
    });
  });

  router.put('/v0/projects/:id/storage/objects/:bucket/:key+', async (request, ctx) => {
    // Every refusal before the body is consumed is answered while the body is drained (refuseUnread);
    // a body already handed to a store is that store's to finish.
    let prepared: Awaited<ReturnType<typeof preparePut>>;
    try {
      prepared = await preparePut(request, ctx);
    } catch (err) {
      if (request.body && !request.bodyUsed && !request.body.locked) return refuseUnread(request, ctx, err);
      throw err;
    }
    const { accountId, project, bucket, key, contentType, backend, current, store } = prepared;
    const { db } = ctx.deps;

    // 1. The bytes, into a blob nobody references yet (already written when the write could start
    // beside the catalog reads).
    const { name, written } = prepared.blob ?? (await writeBlob(request, store, project.id, bucket, key, prepared, contentType ?? current?.content_type));

    // 2. The conditional flip of the row to that blob, with its receipt.
    let prev = current;
    for (let attempt = 1; ; attempt++) {
      const at = nowIso(ctx.deps.now());
      const next: ObjectRecord = {
        id: prev?.id ?? newId('obj'),
        project: project.id,
        bucket,
        key,
        size: written.size,
        etag: written.etag,
        // The header decides; a ticket's content type stands in when the PUT names none.
        content_type: contentType ?? (prev?.state === 'pending' ? prev.content_type : DEFAULT_CONTENT_TYPE),
        backend,
        state: 'stored',
        created_at: prev?.created_at ?? at,
        updated_at: at,
        blob: name,
      };
      const receipt = newReceipt({ project: project.id, op: 'object.put', target: `${bucket}/${key}`, actor: accountId, request_id: ctx.requestId, at });
      let flipped: boolean;
      try {
        flipped = await commitObject(db, next, prev, receipt);
      } catch (err) {
        await discardBlob(ctx, project, backend, name, store);
        throw err;
      }
      if (flipped) {
        // 3. Only now is the previous blob unreferenced: it is deleted after the answer (DESIGN §3
        // "deleted after the flip"), off the client's wait. Should that never happen (a crash, a
        // store that is down), what is left is an unreferenced blob, never a row without bytes.
        if (prev?.blob) ctx.afterAnswer(discardBlob(ctx, project, prev.backend, prev.blob, prev.backend === backend ? store : undefined));
        return json(objectView(next), prev?.state === 'stored' ? 200 : 201);
      }
      if (attempt >= FLIP_ATTEMPTS) {
        await discardBlob(ctx, project, backend, name, store);
        throw errors.conflict(`object ${bucket}/${key} is being written concurrently, retry`);
      }
      // Another writer changed the row since it was read: read again and flip over what it left.
      await pause(Math.random() * 10 * attempt);
      prev = await getObject(db, project.id, bucket, key);
    }
  });

  const readObject = async (request: IRequest, ctx: Ctx, withBody: boolean): Promise<Response> => {
    const { db } = ctx.deps;
    const accountId = await requireSession(request, ctx);
    const projectId = pathParam(request.params.id, 'id', projectIdSchema);
    const bucket = pathParam(request.params.bucket, 'bucket', bucketNameSchema);
    const key = pathParam(request.params.key, 'key', objectKeySchema);
    await noInput(request);
    const { project, bucket: bucketRecord, object: first } = await ownedWith(ctx, accountId, projectId, bucket, key);
    let row = first;
    // A replace may delete the blob just read from the row: re-read the row and follow it.
    for (let attempt = 1; ; attempt++) {
      if (!row) {
        // The bucket as read with the row first; a re-read row that vanished asks again.
        if (attempt === 1 ? !bucketRecord : !(await getBucket(db, project.id, bucket))) throw errors.notFound(`bucket ${bucket} not found`);
        throw notFoundObject(bucket, key);
      }
      if (row.state !== 'stored' || row.blob === null) throw notFoundObject(bucket, key, true);

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
      if (noneMatch(request.headers.get('if-none-match'), row.etag)) return new Response(null, { status: 304, headers });
      const range = resolveRange(request.headers.get('range'), row.size);
      if (range === 'unsatisfiable') throw errors.rangeNotSatisfiable(row.size, Object.fromEntries(headers));
      const status = range ? 206 : 200;
      if (range) headers.set('content-range', `bytes ${range.start}-${range.end}/${row.size}`);
      if (!withBody) {
        headers.set('content-length', String(range ? range.end - range.start + 1 : row.size));
        return new Response(null, { status, headers });
      }
      const store = await storeFor(ctx, project, row.backend);
      let bytes: BlobBytes | null;
      if (row.size === 0) bytes = { body: new ReadableStream({ start: (c) => c.close() }), length: 0 };
      else bytes = await store.get(project.id, row.blob, range ?? undefined, request.signal);
      if (bytes) {
        headers.set('content-length', String(bytes.length));
        return new Response(withLength(bytes.body, bytes.length), { status, headers });
      }
      const again = await getObject(db, project.id, bucket, key);
      if (attempt >= 3 || (again && again.blob === row.blob)) {
        throw errors.upstream(`the ${row.backend} blob store has no bytes for object ${bucket}/${key}`);
      }
      row = again;
    }
  };

  router.get('/v0/projects/:id/storage/objects/:bucket/:key+', (request, ctx) => readObject(request, ctx, true));
  router.head('/v0/projects/:id/storage/objects/:bucket/:key+', (request, ctx) => readObject(request, ctx, false));

  // `…/objects/{bucket}/` with no key: say what is missing rather than "no route".
  for (const method of ['put', 'get', 'head'] as const) {
    router[method]('/v0/projects/:id/storage/objects/:bucket', async (request, ctx) => {
      await requireOwnedProject(request, ctx);
      pathParam(request.params.bucket, 'bucket', bucketNameSchema);
      throw errors.invalid('key: must be 1 to 1024 characters');
    });
  }

  router.get('/v0/projects/:id/storage/objects', async (request, ctx) => {
    const { db } = ctx.deps;
    const { project } = await requireOwnedProject(request, ctx);
    const query = queryOf(new URL(request.url), listObjectsQuerySchema);
    await noBody(request);
    await requireBucket(ctx, project.id, query.bucket);
    const list = ['objects', project.id, query.bucket];
    const page = await listPage(ctx, list, query, (limit, after) => listObjects(db, project.id, query.bucket, limit, after));
    return json({ bucket: query.bucket, objects: page.items.map(objectView), next_cursor: page.next_cursor });
  });

  router.delete('/v0/projects/:id/storage/objects', async (request, ctx) => {
    const { settings, db } = ctx.deps;
    const { accountId, project } = await requireOwnedProject(request, ctx);
    const body = await readJson(request, deleteObjectRequestSchema, settings.SVCD_JSON_MAX_BYTES);
    await requireBucket(ctx, project.id, body.bucket);
    for (let attempt = 1; ; attempt++) {
      const row = await getObject(db, project.id, body.bucket, body.key);
      if (!row) throw notFoundObject(body.bucket, body.key);
      // Resolve the store first: when it is known to be down, answer so before touching the row.
      const store = row.blob !== null ? await storeFor(ctx, project, row.backend) : undefined;
      const at = nowIso(ctx.deps.now());
      const receipt = newReceipt({
        project: project.id,
        op: 'object.delete',
        target: `${body.bucket}/${body.key}`,
        actor: accountId,
        request_id: ctx.requestId,
        at,
      });
      if (await removeObject(db, row, receipt)) {
        // Row first, bytes second: a failure here leaves an unreferenced blob, never a row without bytes.
        if (row.blob !== null) await discardBlob(ctx, project, row.backend, row.blob, store);
        return json(objectView(row));
      }
      if (attempt >= FLIP_ATTEMPTS) throw errors.conflict(`object ${body.bucket}/${body.key} is being written concurrently, retry`);
      await pause(Math.random() * 10 * attempt);
    }
  });
}

/**
 * Everything a PUT of bytes checks and reads before the flip. Any failure before the body is
 * touched is answered unread (refuseUnread).
 *
 * The catalog reads (project, bucket, row) cost a DynamoDB round trip. When this isolate has seen
 * the caller own the project, and (on `fs`) knows its live agent without a read, the blob is
 * written while they are under way rather than after (`blob` in the answer). Only then: a stranger's
 * PUT never writes a byte, and learns nothing from how long its 404 takes. Should the reads refuse
 * after all (a bucket that does not exist, say), the body has been taken in whole by then, and the
 * new blob, which nothing references, is deleted before the refusal is answered.
 */
async function preparePut(request: IRequest, ctx: Ctx) {
  const { settings } = ctx.deps;
  const accountId = await requireSession(request, ctx);
  const projectId = pathParam(request.params.id, 'id', projectIdSchema);
  const bucket = pathParam(request.params.bucket, 'bucket', bucketNameSchema);
  const key = pathParam(request.params.key, 'key', objectKeySchema);
  // The body is the object's bytes; nothing else is input (docs/api.md "Decisions").
  noQuery(new URL(request.url));
  const maxBytes = settings.SVCD_STORAGE_MAX_BYTES;
  const length = declaredLength(request);
  // Refused before a byte is read or anything is written (contract "Limits").
  if (length !== null && length > maxBytes) throw tooLargeError(maxBytes);
  const rawType = request.headers.get('content-type');
  const contentType = rawType === null ? null : parseOr400(contentTypeSchema, rawType, 'content-type');
  const backend = settings.SVCD_BLOB_BACKEND;
  const reads = ownedWith(ctx, accountId, projectId, bucket, key);

  const early = ctx.deps.placement.ownerOf(projectId) === accountId ? earlyStore(ctx, projectId, backend) : null;
  if (!early) {
    const { project, bucket: bucketRecord, object: current } = await reads;
    if (!bucketRecord) throw errors.notFound(`bucket ${bucket} not found`);
    const store = await storeFor(ctx, project, backend);
    return { accountId, project, bucket, key, length, maxBytes, contentType, backend, current, store, blob: null };
  }

  // The row is not known yet: the blob's own content type (S3 metadata, which nothing serves) is
  // the header's; the row's is decided at the flip as always.
  const writing = writeBlob(request, early.store, projectId, bucket, key, { length, maxBytes }, contentType);
  const [read, wrote] = await Promise.allSettled([reads, writing]);
  let refusal: unknown = null;
  if (read.status === 'rejected') refusal = read.reason;
  else if (!read.value.bucket) refusal = errors.notFound(`bucket ${bucket} not found`);
  // Tenants never move, so a remembered placement cannot be wrong; should it be, nothing is kept.
  else if (early.agentId !== null && read.value.project.agent_id !== early.agentId) refusal = errors.upstream(`project ${projectId} is not on host agent ${early.agentId}, retry`);
  if (refusal !== null) {
    if (wrote.status === 'fulfilled') {
      const { name } = wrote.value;
      await early.store.delete(projectId, name).catch((err: Error) => {
        ctx.deps.log(`storage: request ${ctx.requestId}: unreferenced ${backend} blob ${projectId}/${name} left behind: ${err.message}`);
      });
    }
    throw refusal;
  }
  if (wrote.status === 'rejected') throw wrote.reason;
  const { project, object: current } = (read as PromiseFulfilledResult<Awaited<typeof reads>>).value;
  return { accountId, project, bucket, key, length, maxBytes, contentType, backend, current, store: early.store, blob: wrote.value };
}

/**
 * The store a PUT for `projectId` can write to before the project is read: `s3` always, `fs` when
 * this isolate remembers the project's live agent (handlers/domain/placement.ts), else null.
 */
function earlyStore(ctx: Ctx, projectId: string, backend: BlobBackend): { store: BlobStore; agentId: string | null } | null {
  if (backend === 's3') return { store: s3BlobStore(ctx.deps.settings), agentId: null };
  const agent = rememberedAgent(ctx.deps, projectId);
  if (!agent) return null;
  return { store: agentBlobStore(ctx.deps.agents, agent, ctx.requestId, () => ctx.deps.placement.forgetAgent(agent.agent_id)), agentId: agent.agent_id };
}

/**
 * Answers `err` to a request whose body is still unread, reading and discarding the body meanwhile
 * (shared/http/linger.ts).
 */
function refuseUnread(request: Request, ctx: Ctx, err: unknown): Response {
  return answerWhileDraining(errorResponse(err, ctx.requestId, ctx.deps.log), request.body);
}

/** The request's `Content-Length`, or null when it streams without one; a malformed one is 400. */
function declaredLength(request: Request): number | null {
  const raw = request.headers.get('content-length');
  if (raw === null) return null;
  if (!/^\d{1,16}$/.test(raw.trim())) throw errors.invalid('content-length: must be a non-negative integer');
  return Number(raw.trim());
}
