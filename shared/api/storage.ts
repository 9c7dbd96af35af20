/**
 * Declarations: object storage (the interface contract "PUT/GET storage/buckets", "POST
 * storage/uploads|downloads", "PUT/GET/DELETE storage/objects"; docs/storage.md).
 */
import {
  bucketListSchema,
  bucketNameSchema,
  bucketSchema,
  deleteBucketQuerySchema,
  deleteObjectRequestSchema,
  downloadTicketRequestSchema,
  downloadTicketSchema,
  listObjectsQuerySchema,
  objectKeySchema,
  objectListSchema,
  objectReadQuerySchema,
  objectRowSchema,
  uploadTicketRequestSchema,
  uploadTicketSchema,
} from '../schemas/storage.ts';
import { pageQuerySchema } from '../schemas/pagination.ts';
import { project } from './projects.ts';
import { route, type Method, type RequestBody } from './route.ts';

// Resumable uploads (TUS) belong to this namespace (docs/storage.md "Resumable uploads").
export { createResumable, deleteResumable, headResumable, patchResumable, resumableOptions, resumableRoutes } from './resumable.ts';

const bucket = { ...project, bucket: bucketNameSchema };
const object = { ...bucket, key: objectKeySchema };

export const putBucket = route({
  method: 'PUT',
  path: '/v0/projects/:id/storage/buckets/:bucket',
  tag: 'storage',
  summary: 'Create a bucket',
  description: 'Idempotent: 201 when created, 200 when it existed.',
  access: 'session',
  params: bucket,
  answers: { 201: { description: 'created', json: bucketSchema }, 200: { description: 'already there', json: bucketSchema } },
  // 409 while a deletion of the bucket is unfinished (docs/storage.md "Deleting a bucket").
  errors: [409],
});

export const listBuckets = route({
  method: 'GET',
  path: '/v0/projects/:id/storage/buckets',
  tag: 'storage',
  summary: 'List buckets',
  access: 'session',
  params: project,
  query: pageQuerySchema,
  answers: { 200: { description: 'a page of buckets', json: bucketListSchema } },
});

export const deleteBucket = route({
  method: 'DELETE',
  path: '/v0/projects/:id/storage/buckets/:bucket',
  tag: 'storage',
  summary: 'Delete a bucket',
  description:
    '409 while it holds objects (pending rows too), unless `force=true`: then every object is deleted first, each ' +
    'receipted as `DELETE …/objects` is, then the bucket (`bucket.delete` receipt). A forced deletion cut short ' +
    'leaves the bucket with fewer objects, taking no new ones (409); repeating the DELETE finishes it ' +
    '(docs/storage.md "Deleting a bucket").',
  access: 'session',
  params: bucket,
  query: deleteBucketQuerySchema,
  answers: { 200: { description: 'the deleted bucket', json: bucketSchema } },
  errors: [409, 502, 503],
});

export const uploadTicket = route({
  method: 'POST',
  path: '/v0/projects/:id/storage/uploads',
  tag: 'storage',
  summary: 'Reserve an upload (pending row)',
  description: 'The ticket names a path on this origin to PUT the bytes to, with the session bearer.',
  access: 'session',
  params: project,
  body: { flow: 'json', schema: uploadTicketRequestSchema },
  answers: { 201: { description: 'the upload ticket', json: uploadTicketSchema } },
  errors: [409],
});

export const downloadTicket = route({
  method: 'POST',
  path: '/v0/projects/:id/storage/downloads',
  tag: 'storage',
  summary: 'A ticket to read an object',
  description:
    'With `signed: true` the ticket also carries `signed_url`, which reads the object without a session until ' +
    '`expires_at` (`expires_in` seconds, default the ticket lifetime, at most `SVCD_SIGNED_URL_MAX_SECONDS`; ' +
    'docs/storage.md "Signed URLs").',
  access: 'session',
  params: project,
  body: { flow: 'json', schema: downloadTicketRequestSchema },
  answers: { 200: { description: 'the download ticket', json: downloadTicketSchema } },
});

const objectBytes: RequestBody = { flow: 'bytes', media: { type: '*/*', description: 'the object\'s bytes; `Content-Type` is stored with them (default `application/octet-stream`)' } };

export const putObject = route({
  method: 'PUT',
  path: '/v0/projects/:id/storage/objects/:bucket/:key+',
  tag: 'storage',
  summary: 'Write an object\'s bytes',
  description:
    'Streams the body into the blob store, then upserts the catalog row; receipted. The body is at most ' +
    '`SVCD_STORAGE_MAX_BYTES` (413 before a byte is read when `Content-Length` says more). `If-None-Match: *` ' +
    'creates only, `If-Match` replaces only the listed ETags; a failed precondition is 409 `conflict`, not 412 ' +
    '(docs/storage.md "Conditional requests"). 409 too while the bucket is being deleted.',
  access: 'session',
  params: object,
  headers: {
    'If-Match': { description: 'ETags or `*`: write only over stored bytes with one of these ETags (strong comparison)' },
    'If-None-Match': { description: '`*` (write only when the key has no bytes) or ETags the current bytes must not have' },
  },
  body: objectBytes,
  answers: { 201: { description: 'a new object', json: objectRowSchema }, 200: { description: 'replaced (id kept)', json: objectRowSchema } },
  errors: [409, 413, 502, 503],
});

const bytesHeaders = {
  'Content-Type': 'the type the object was stored with',
  ETag: 'the blob store\'s ETag (S3) or SHA-256 hex (fs), quoted',
  'X-Svc-Object-Id': 'the catalog row id',
  'Last-Modified': 'when the bytes were last replaced',
  'Accept-Ranges': '`bytes`',
};

/** GET and HEAD of an object: the same rules, with or without the bytes. */
function objectRead<M extends 'GET' | 'HEAD'>(method: M) {
  const withBody = method === 'GET';
  return route({
    method,
    path: '/v0/projects/:id/storage/objects/:bucket/:key+',
    tag: 'storage',
    summary: withBody ? 'Read an object\'s bytes' : 'Read an object\'s headers',
    description:
      'The owner session, or instead a signed URL from a download ticket (`?expires=…&signature=…`, no ' +
      '`Authorization` header; 401 once expired or altered; docs/storage.md "Signed URLs"). `{key}` may contain ' +
      '`/`; other reserved characters are percent-encoded. A single `Range: bytes=…` is honoured (206) unless an ' +
      '`If-Range` no longer matches (then 200, the whole object); `If-None-Match` with the current ETag, or an ' +
      '`If-Modified-Since` not before `Last-Modified`, answers 304 (RFC 9110 §13). A pending row has no bytes yet: 404.',
    access: 'session',
    params: object,
    query: objectReadQuerySchema,
    headers: {
      Range: { description: 'one byte range (RFC 9110 §14.2); a range past the end is 416' },
      'If-None-Match': { description: 'ETags or `*`; 304 when one is the current one' },
      'If-Modified-Since': { description: 'an HTTP-date; 304 when the object was not modified after it (ignored beside `If-None-Match`)' },
      'If-Range': { description: 'an ETag or an HTTP-date; the `Range` applies only while it matches, else the whole object' },
    },
    answers: {
      200: { description: 'the bytes', content: { type: '*/*', description: 'the object\'s bytes, unchanged' }, headers: bytesHeaders },
      206: { description: 'the asked range', content: { type: '*/*', description: 'the bytes of the range' }, headers: { ...bytesHeaders, 'Content-Range': '`bytes first-last/size`' } },
      304: { description: 'not modified (the ETag matched)', headers: bytesHeaders },
    },
    answerFlow: withBody ? 'bytes' : 'none',
    errors: [416, 502, 503],
  });
}

export const getObject = objectRead('GET');
export const headObject = objectRead('HEAD');

export const deleteObjectByPath = route({
  method: 'DELETE',
  path: '/v0/projects/:id/storage/objects/:bucket/:key+',
  tag: 'storage',
  summary: 'Delete an object by its path',
  description: 'Removes the catalog row and the blob; receipted. 404 when absent.',
  access: 'session',
  params: object,
  answers: { 200: { description: 'the removed row', json: objectRowSchema } },
  errors: [409, 502, 503],
});

/** `…/objects/{bucket}` with no key: always 400, after the credential and ownership checks. */
function noKey<M extends Method>(method: M) {
  return route({
    method,
    path: '/v0/projects/:id/storage/objects/:bucket',
    tag: 'storage',
    summary: `${method} an object without a key`,
    description: 'A path that names a bucket but no key: always 400 `key: must be 1 to 1024 characters`, after the credential and ownership checks.',
    access: 'session',
    params: bucket,
    ignoresInput: true,
    // A PUT here still carries an object's bytes: drained while refused, never through a gateway.
    ...(method === 'PUT' ? { body: objectBytes } : {}),
    answers: {},
  });
}

export const noKeyRoutes = [noKey('PUT'), noKey('GET'), noKey('HEAD'), noKey('DELETE')];

export const listObjects = route({
  method: 'GET',
  path: '/v0/projects/:id/storage/objects',
  tag: 'storage',
  summary: 'List a bucket\'s objects by key',
  description:
    'Pending rows included, with their `state`. `prefix` keeps the keys that start with it; with `delimiter`, each ' +
    'key holding it after the prefix is rolled up into `common_prefixes` (S3\'s ListObjectsV2). `limit` counts rows ' +
    'and prefixes together; a cursor belongs to its prefix and delimiter.',
  access: 'session',
  params: project,
  query: listObjectsQuerySchema,
  answers: { 200: { description: 'a page of rows', json: objectListSchema } },
});

export const deleteObject = route({
  method: 'DELETE',
  path: '/v0/projects/:id/storage/objects',
  tag: 'storage',
  summary: 'Delete an object',
  description: 'Removes the catalog row and the blob; receipted. 404 when absent.',
  access: 'session',
  params: project,
  body: { flow: 'json', schema: deleteObjectRequestSchema },
  answers: { 200: { description: 'the removed row', json: objectRowSchema } },
  errors: [409, 502, 503],
});

/** Buckets and tickets, in the order they are matched. */
export const bucketRoutes = [putBucket, listBuckets, deleteBucket] as const;
export const ticketRoutes = [uploadTicket, downloadTicket] as const;
/** Objects, in the order they are matched. */
export const objectRoutes = [putObject, getObject, headObject, deleteObjectByPath, ...noKeyRoutes, listObjects, deleteObject] as const;
