/**
 * Every public route's description, keyed by `"<METHOD> <itty-router pattern>"` exactly as the route
 * registers it (handlers/routes/), built from the schemas the route validates with. Adding a route:
 * add its entry here under its resource (docs/api.md "Adding a route"); the route-table test fails
 * until every route has one and every entry has a route.
 */
import { z } from 'zod';
import {
  meAnswerSchema,
  rotatedSecretAnswerSchema,
  rotateSecretRequestSchema,
  sessionAnswerSchema,
  sessionRequestSchema,
  signupAnswerSchema,
  signupRequestSchema,
} from '../schemas/accounts.ts';
import { degradedHealthAnswerSchema, healthAnswerSchema } from '../schemas/health.ts';
import { createKeyRequestSchema, issuedKeySchema, keyIdSchema, keyListSchema, keySchema } from '../schemas/keys.ts';
import { headAnswerSchema } from '../schemas/lifecycle.ts';
import { logsAnswerSchema, logsQuerySchema } from '../schemas/logs.ts';
import { pageQuerySchema } from '../schemas/pagination.ts';
import { createProjectRequestSchema, projectIdSchema, projectListSchema, projectSchema, renameProjectRequestSchema } from '../schemas/projects.ts';
import { accountReceiptsQuerySchema } from '../schemas/project-delete.ts';
import { publishRequestSchema, realtimeEventSchema, realtimeTicketSchema, subscribeQuerySchema, ticketRequestSchema } from '../schemas/realtime.ts';
import { receiptListSchema } from '../schemas/receipts.ts';
import { putSecretRequestSchema, secretListSchema, secretMetadataSchema, secretNameSchema } from '../schemas/secrets.ts';
import {
  deployQuerySchema,
  functionListSchema,
  functionLogsQuerySchema,
  functionLogsSchema,
  functionNameSchema,
  functionSchema,
  functionVersionListSchema,
} from '../schemas/functions.ts';
import {
  createSnapshotRequestSchema,
  replacedDirSchema,
  replacedListSchema,
  replacedNameSchema,
  restoreAnswerSchema,
  restoreRequestSchema,
  snapshotIdSchema,
  snapshotListSchema,
  snapshotSchema,
} from '../schemas/snapshots.ts';
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
  objectReadQuerySchema,
  objectListSchema,
  objectRowSchema,
  uploadTicketRequestSchema,
  uploadTicketSchema,
} from '../schemas/storage.ts';
import type { RouteDoc, RouteDocs } from './describe.ts';

const project = { id: projectIdSchema };
const object = { ...project, bucket: bucketNameSchema, key: objectKeySchema };
const bytesHeaders = {
  'Content-Type': 'the type the object was stored with',
  ETag: 'the blob store\'s ETag (S3) or SHA-256 hex (fs), quoted',
  'X-Svc-Object-Id': 'the catalog row id',
  'Last-Modified': 'when the bytes were last replaced',
  'Accept-Ranges': '`bytes`',
};
const objectRead = (withBody: boolean): RouteDoc => ({
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
  errors: [416, 502, 503],
});
const noKey = (method: string): RouteDoc => ({
  tag: 'storage',
  summary: `${method} an object without a key`,
  description: 'A path that names a bucket but no key: always 400 `key: must be 1 to 1024 characters`, after the credential and ownership checks.',
  access: 'session',
  params: { ...project, bucket: bucketNameSchema },
  answers: {},
});

/** Every public route, by `"<METHOD> <pattern>"`. */
export const ROUTE_DOCS: RouteDocs = {
  // Health and the document -----------------------------------------------------------------------
  'GET /v0/health': {
    tag: 'service',
    summary: 'Health of the service',
    description: 'No credential. 200 while at least one registered host agent is live; else 503 with the error envelope beside the same figures (docs/api.md "Decisions": health). Its query is ignored.',
    access: 'none',
    answers: {
      200: { description: 'serving', json: healthAnswerSchema },
      503: { description: 'degraded: no host agent can run tenants', json: degradedHealthAnswerSchema },
    },
  },
  'GET /v0/openapi.json': {
    tag: 'service',
    summary: 'This API as an OpenAPI 3.1 document',
    description: 'No credential. Generated from the same schemas that validate requests (docs/api.md "How the reference is made").',
    access: 'none',
    answers: { 200: { description: 'the document', content: { type: 'application/json', description: 'an OpenAPI 3.1 document' } } },
  },
  'GET /console': {
    tag: 'service',
    summary: 'The web console',
    description:
      'No credential: the page signs in through this API. `/console/` is the page (static, embedded in the handlers bundle by build.mjs; ' +
      '404 when run from source); `/console` without the slash is 308 to it (docs/console.md).',
    access: 'none',
    answers: {
      200: { description: 'the page (`/console/`)', content: { type: 'text/html', description: 'the console page' }, headers: { ETag: 'validator', 'Content-Security-Policy': 'this origin only' } },
      304: { description: 'not modified (If-None-Match)' },
      308: { description: '`/console` to `/console/`', headers: { Location: '`/console/`' } },
    },
  },
  'GET /console/:file': {
    tag: 'service',
    summary: 'A script or stylesheet of the web console',
    description: 'No credential. Names carry their content hash and are cached for a year (docs/console.md).',
    access: 'none',
    params: { file: z.string() },
    answers: {
      200: { description: 'the file', content: { type: 'text/javascript', description: 'a script or a stylesheet' }, headers: { ETag: 'validator' } },
      304: { description: 'not modified (If-None-Match)' },
    },
  },

  // Accounts ---------------------------------------------------------------------------------------
  'POST /v0/signup': {
    tag: 'accounts',
    summary: 'Create an account',
    description: 'Answers the account secret once (only a verifier is kept) and a first session token. On an invite-gated deployment a missing or unknown `invite_code` is 403.',
    access: 'none',
    body: signupRequestSchema,
    bodyOptional: true,
    answers: { 201: { description: 'the account, its secret (shown once) and a session', json: signupAnswerSchema } },
    errors: [403, 413],
  },
  'POST /v0/sessions': {
    tag: 'accounts',
    summary: 'Open a session',
    description: 'An unknown account and a wrong secret answer the same 401.',
    access: 'none',
    body: sessionRequestSchema,
    answers: { 201: { description: 'a session token', json: sessionAnswerSchema } },
    errors: [401, 413],
  },
  'DELETE /v0/sessions/current': {
    tag: 'accounts',
    summary: 'Sign out: end the presented session',
    description: 'From the very next request on, the token is 401 on every route; the account\'s other sessions are untouched (docs/api.md "Sessions").',
    access: 'session',
    answers: { 204: { description: 'the session has ended' } },
  },
  'GET /v0/me': {
    tag: 'accounts',
    summary: 'The account of the session',
    description: 'Its id, name, creation time, number of projects and when its secret was last rotated; never the secret.',
    access: 'session',
    answers: { 200: { description: 'the account', json: meAnswerSchema } },
  },
  'POST /v0/account/secret': {
    tag: 'accounts',
    summary: 'Rotate the account secret',
    description:
      'Confirmed by the current `account_secret` (a wrong one is 401). Answers the new secret, shown only here (only a verifier is kept), and a new session; ' +
      'every session issued before, the caller\'s included, is 401 from the next request on, and the old secret no longer opens one (docs/api.md "Sessions").',
    access: 'session',
    body: rotateSecretRequestSchema,
    answers: { 200: { description: 'the new secret (shown once) and a session', json: rotatedSecretAnswerSchema } },
    errors: [413],
  },

  // Projects ---------------------------------------------------------------------------------------
  'POST /v0/projects': {
    tag: 'projects',
    summary: 'Create a project',
    description: 'Reserves a tenant on the least-loaded live host agent; the engine is not started (state `stopped`).',
    access: 'session',
    body: createProjectRequestSchema,
    answers: { 201: { description: 'the project', json: projectSchema } },
    errors: [413, 503],
  },
  'GET /v0/projects': {
    tag: 'projects',
    summary: 'List your projects',
    access: 'session',
    query: pageQuerySchema,
    answers: { 200: { description: 'a page of projects', json: projectListSchema } },
  },
  'GET /v0/projects/:id': {
    tag: 'projects',
    summary: 'Read a project',
    description: 'The recorded state reconciled with the live process (a correction is written back).',
    access: 'session',
    params: project,
    answers: { 200: { description: 'the project', json: projectSchema } },
    errors: [503],
  },

  'PATCH /v0/projects/:id': {
    tag: 'projects',
    summary: 'Rename a project',
    description: 'The name follows the rule of creation and is kept exactly as given; answered as GET answers (the state reconciled by the project\'s agent, so 503 when that agent is not live, and nothing is renamed).',
    access: 'session',
    params: project,
    body: renameProjectRequestSchema,
    answers: { 200: { description: 'the project', json: projectSchema } },
    errors: [413, 503],
  },
  'DELETE /v0/projects/:id': {
    tag: 'projects',
    summary: 'Delete a project and everything it holds',
    description: 'Owner session only: its engine, data directory, snapshots, keys, buckets and objects; receipted. At once every project route answers 404 and `/v2` with its keys 401 (docs/lifecycle.md).',
    access: 'session',
    params: project,
    answers: { 200: { description: 'the project as it was', json: projectSchema } },
    errors: [409, 502, 503],
  },

  // Lifecycle --------------------------------------------------------------------------------------
  'POST /v0/projects/:id/wakeup': {
    tag: 'lifecycle',
    summary: 'Start the project\'s engine',
    description: 'Idempotent; initializes the data directory on first start (docs/lifecycle.md).',
    access: 'session',
    params: project,
    answers: { 200: { description: 'the project, `running`', json: projectSchema } },
    errors: [502, 503],
  },
  'POST /v0/projects/:id/sleep': {
    tag: 'lifecycle',
    summary: 'Stop the project\'s engine',
    description: 'Graceful stop; the data directory is kept. Idempotent.',
    access: 'session',
    params: project,
    answers: { 200: { description: 'the project, `sleeping`', json: projectSchema } },
    errors: [502, 503],
  },
  'GET /v0/projects/:id/head': {
    tag: 'lifecycle',
    summary: 'What the engine says about itself',
    description: 'A live probe of a running engine, or the offline status of a sleeping one; a tenant never started is 409 `tenant_not_running`.',
    access: 'session',
    params: project,
    answers: { 200: { description: 'the probe result', json: headAnswerSchema } },
    errors: [409, 502, 503],
  },
  'POST /v0/projects/:id/snapshots': {
    tag: 'lifecycle',
    summary: 'Snapshot the sleeping tenant',
    description: 'A verified backup of the data directory; 409 `tenant_running` while the engine runs, 409 `tenant_not_running` before its first start.',
    access: 'session',
    params: project,
    body: createSnapshotRequestSchema,
    bodyOptional: true,
    answers: { 201: { description: 'the snapshot', json: snapshotSchema } },
    errors: [409, 413, 502, 503],
  },
  'GET /v0/projects/:id/snapshots': {
    tag: 'lifecycle',
    summary: 'List snapshots, newest first',
    access: 'session',
    params: project,
    query: pageQuerySchema,
    answers: { 200: { description: 'a page of snapshots', json: snapshotListSchema } },
  },
  'GET /v0/projects/:id/snapshots/:snapshot_id': {
    tag: 'lifecycle',
    summary: 'Read a snapshot',
    access: 'session',
    params: { ...project, snapshot_id: snapshotIdSchema },
    answers: { 200: { description: 'the snapshot', json: snapshotSchema } },
  },
  'DELETE /v0/projects/:id/snapshots/:snapshot_id': {
    tag: 'lifecycle',
    summary: 'Delete a snapshot and its backup directory',
    description:
      'Receipted (`snapshot.delete`). 409 `conflict` while a restore of it is asked for or running, or while it is being taken; ' +
      'a deleted snapshot is 404 everywhere, restore included (docs/lifecycle.md "Deleting a snapshot").',
    access: 'session',
    params: { ...project, snapshot_id: snapshotIdSchema },
    answers: { 200: { description: 'the snapshot as it was', json: snapshotSchema } },
    errors: [409, 503],
  },
  'POST /v0/projects/:id/restore': {
    tag: 'lifecycle',
    summary: 'Restore a snapshot into the sleeping tenant',
    description: 'The previous data directory is moved aside under `replaced/` and kept; the tenant stays asleep. 409 `tenant_running` while the engine runs; 404 for an unknown snapshot.',
    access: 'session',
    params: project,
    body: restoreRequestSchema,
    answers: { 200: { description: 'restored', json: restoreAnswerSchema } },
    errors: [409, 413, 502, 503],
  },
  'GET /v0/projects/:id/replaced': {
    tag: 'lifecycle',
    summary: 'List the previous data directories restore kept, newest first',
    description: 'Each with when it was moved aside, the snapshot that replaced it and its size (docs/lifecycle.md "Previous data directories").',
    access: 'session',
    params: project,
    query: pageQuerySchema,
    answers: { 200: { description: 'a page of previous directories', json: replacedListSchema } },
    errors: [503],
  },
  'DELETE /v0/projects/:id/replaced/:name': {
    tag: 'lifecycle',
    summary: 'Free a previous data directory',
    description: 'Receipted (`replaced.delete`). `{name}` is one answered by the list; anything that could leave `replaced/` is 400, an unknown name 404.',
    access: 'session',
    params: { ...project, name: replacedNameSchema },
    answers: { 200: { description: 'the directory as it was; its `bytes` are what was freed', json: replacedDirSchema } },
    errors: [503],
  },

  // Keys -------------------------------------------------------------------------------------------
  'POST /v0/projects/:id/keys': {
    tag: 'keys',
    summary: 'Issue a project key',
    description: 'The one answer that carries the secret `key` (`Cache-Control: no-store`); only a verifier is kept.',
    access: 'session',
    params: project,
    body: createKeyRequestSchema,
    bodyOptional: true,
    answers: { 201: { description: 'the key, with its secret', json: issuedKeySchema } },
    errors: [413],
  },
  'GET /v0/projects/:id/keys': {
    tag: 'keys',
    summary: 'List project keys',
    description: 'Never the secret.',
    access: 'session',
    params: project,
    query: pageQuerySchema,
    answers: { 200: { description: 'a page of keys', json: keyListSchema } },
  },
  'DELETE /v0/projects/:id/keys/:key_id': {
    tag: 'keys',
    summary: 'Revoke a project key',
    description: 'The very next `/v2` request with it is 401. Revoking again answers 200 with the original `revoked_at`.',
    access: 'session',
    params: { ...project, key_id: keyIdSchema },
    answers: { 200: { description: 'the revoked key', json: keySchema } },
    errors: [503],
  },

  // Storage ----------------------------------------------------------------------------------------
  'PUT /v0/projects/:id/storage/buckets/:bucket': {
    tag: 'storage',
    summary: 'Create a bucket',
    description: 'Idempotent: 201 when created, 200 when it existed.',
    access: 'session',
    params: { ...project, bucket: bucketNameSchema },
    answers: { 201: { description: 'created', json: bucketSchema }, 200: { description: 'already there', json: bucketSchema } },
  },
  'DELETE /v0/projects/:id/storage/buckets/:bucket': {
    tag: 'storage',
    summary: 'Delete a bucket',
    description:
      '409 while it holds objects (pending rows too), unless `force=true`: then every object is deleted first, each ' +
      'receipted as `DELETE …/objects` is, then the bucket (`bucket.delete` receipt). A forced deletion cut short ' +
      'leaves the bucket with fewer objects, taking no new ones (409); repeating the DELETE finishes it ' +
      '(docs/storage.md "Deleting a bucket").',
    access: 'session',
    params: { ...project, bucket: bucketNameSchema },
    query: deleteBucketQuerySchema,
    answers: { 200: { description: 'the deleted bucket', json: bucketSchema } },
    errors: [409, 502, 503],
  },
  'GET /v0/projects/:id/storage/buckets': {
    tag: 'storage',
    summary: 'List buckets',
    access: 'session',
    params: project,
    query: pageQuerySchema,
    answers: { 200: { description: 'a page of buckets', json: bucketListSchema } },
  },
  'POST /v0/projects/:id/storage/uploads': {
    tag: 'storage',
    summary: 'Reserve an upload (pending row)',
    description: 'The ticket names a path on this origin to PUT the bytes to, with the session bearer.',
    access: 'session',
    params: project,
    body: uploadTicketRequestSchema,
    answers: { 201: { description: 'the upload ticket', json: uploadTicketSchema } },
    errors: [413],
  },
  'POST /v0/projects/:id/storage/downloads': {
    tag: 'storage',
    summary: 'A ticket to read an object',
    description:
      'With `signed: true` the ticket also carries `signed_url`, which reads the object without a session until ' +
      '`expires_at` (`expires_in` seconds, default the ticket lifetime, at most `SVCD_SIGNED_URL_MAX_SECONDS`; ' +
      'docs/storage.md "Signed URLs").',
    access: 'session',
    params: project,
    body: downloadTicketRequestSchema,
    answers: { 200: { description: 'the download ticket', json: downloadTicketSchema } },
    errors: [413],
  },
  'PUT /v0/projects/:id/storage/objects/:bucket/:key+': {
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
    rawBody: { type: '*/*', description: 'the object\'s bytes; `Content-Type` is stored with them (default `application/octet-stream`)' },
    answers: { 201: { description: 'a new object', json: objectRowSchema }, 200: { description: 'replaced (id kept)', json: objectRowSchema } },
    errors: [409, 413, 502, 503],
  },
  'GET /v0/projects/:id/storage/objects/:bucket/:key+': objectRead(true),
  'HEAD /v0/projects/:id/storage/objects/:bucket/:key+': objectRead(false),
  'DELETE /v0/projects/:id/storage/objects/:bucket/:key+': {
    tag: 'storage',
    summary: 'Delete an object by its path',
    description: 'Removes the catalog row and the blob; receipted. 404 when absent.',
    access: 'session',
    params: object,
    answers: { 200: { description: 'the removed row', json: objectRowSchema } },
    errors: [502, 503],
  },
  'PUT /v0/projects/:id/storage/objects/:bucket': noKey('PUT'),
  'DELETE /v0/projects/:id/storage/objects/:bucket': noKey('DELETE'),
  'GET /v0/projects/:id/storage/objects/:bucket': noKey('GET'),
  'HEAD /v0/projects/:id/storage/objects/:bucket': noKey('HEAD'),
  'GET /v0/projects/:id/storage/objects': {
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
  },
  'DELETE /v0/projects/:id/storage/objects': {
    tag: 'storage',
    summary: 'Delete an object',
    description: 'Removes the catalog row and the blob; receipted. 404 when absent.',
    access: 'session',
    params: project,
    body: deleteObjectRequestSchema,
    answers: { 200: { description: 'the removed row', json: objectRowSchema } },
    errors: [413, 502, 503],
  },

  // Realtime ---------------------------------------------------------------------------------------
  'POST /v0/projects/:id/realtime/publish': {
    tag: 'realtime',
    summary: 'Publish an event',
    description: 'Owner session only; `system` is reserved. The payload is at most 32 KiB as JSON.',
    access: 'session',
    params: project,
    body: publishRequestSchema,
    answers: { 200: { description: 'the event as delivered', json: realtimeEventSchema } },
    errors: [413, 503],
  },
  'POST /v0/projects/:id/realtime/tickets': {
    tag: 'realtime',
    summary: 'Issue a single-use subscription ticket (browsers)',
    description:
      'The owner session or a project key of the project. The ticket opens one subscription to (a subset of) its channels, ' +
      'within 60 s, as `?ticket=` on subscribe: browsers\' EventSource cannot send Authorization, and no long-lived ' +
      'credential is accepted in a URL (docs/realtime.md "Browsers: tickets").',
    access: 'session-or-key',
    params: project,
    body: ticketRequestSchema,
    answers: { 201: { description: 'the ticket and the subscribe URL that uses it', json: realtimeTicketSchema } },
    errors: [403, 413],
  },
  'GET /v0/projects/:id/realtime/subscribe': {
    tag: 'realtime',
    summary: 'Subscribe to channels (Server-Sent Events)',
    description: 'The owner session or a project key of the project in `Authorization`, or a single-use `ticket` from POST realtime/tickets (browsers; a long-lived credential in the URL is 400). `id:` the event id, `event:` its name, `data:` the event as delivered; a comment heartbeat; a subscriber that falls behind gets `event: overflow` and is closed (docs/realtime.md).',
    access: 'session-or-key',
    params: project,
    query: subscribeQuerySchema,
    repeatable: ['channel'],
    answers: { 200: { description: 'the event stream', content: { type: 'text/event-stream', description: 'Server-Sent Events' } } },
    errors: [503],
  },

  // Secrets ----------------------------------------------------------------------------------------
  'PUT /v0/projects/:id/functions/secrets/:name': {
    tag: 'secrets',
    summary: 'Create or rotate a function secret',
    description: 'Owner session only. 201 created, 200 rotated (version incremented); receipted with the name only. The value is never answered.',
    access: 'session',
    params: { ...project, name: secretNameSchema },
    body: putSecretRequestSchema,
    answers: { 201: { description: 'created', json: secretMetadataSchema }, 200: { description: 'rotated', json: secretMetadataSchema } },
    errors: [413, 503],
  },
  'GET /v0/projects/:id/functions/secrets': {
    tag: 'secrets',
    summary: 'List function secrets (metadata)',
    access: 'session',
    params: project,
    query: pageQuerySchema,
    answers: { 200: { description: 'a page of secrets\' metadata', json: secretListSchema } },
  },
  'GET /v0/projects/:id/functions/secrets/:name': {
    tag: 'secrets',
    summary: 'Read a function secret\'s metadata',
    access: 'session',
    params: { ...project, name: secretNameSchema },
    answers: { 200: { description: 'the metadata', json: secretMetadataSchema } },
  },
  'DELETE /v0/projects/:id/functions/secrets/:name': {
    tag: 'secrets',
    summary: 'Delete a function secret',
    description: 'Receipted (`secret.delete`).',
    access: 'session',
    params: { ...project, name: secretNameSchema },
    answers: { 200: { description: 'the deleted secret\'s metadata', json: secretMetadataSchema } },
  },

  // Functions --------------------------------------------------------------------------------------
  'PUT /v0/projects/:id/functions/:name': {
    tag: 'functions',
    summary: 'Deploy a function (a new version)',
    description:
      'Owner session only. The body is one JavaScript ES module, already bundled, whose default export has ' +
      '`fetch(request, env, ctx)`; at most `SVCD_FUNCTION_MAX_BYTES` (413). A module that does not load or has no ' +
      'default `fetch` is 400 naming the problem. Every deploy is a new immutable version; receipted ' +
      '(`function.deploy`). Settings not given take their defaults (docs/functions.md).',
    access: 'session',
    params: { ...project, name: functionNameSchema },
    query: deployQuerySchema,
    headers: { 'Content-Type': { description: '`application/javascript` or `text/javascript`', required: true } },
    rawBody: { type: 'application/javascript', description: 'the module\'s source' },
    answers: { 201: { description: 'a new function', json: functionSchema }, 200: { description: 'a new version', json: functionSchema } },
    errors: [413, 503],
  },
  'GET /v0/projects/:id/functions': {
    tag: 'functions',
    summary: 'List functions, by name',
    access: 'session',
    params: project,
    query: pageQuerySchema,
    answers: { 200: { description: 'a page of functions', json: functionListSchema } },
  },
  'GET /v0/projects/:id/functions/:name': {
    tag: 'functions',
    summary: 'Read a function (its current version)',
    access: 'session',
    params: { ...project, name: functionNameSchema },
    answers: { 200: { description: 'the function', json: functionSchema } },
  },
  'GET /v0/projects/:id/functions/:name/versions': {
    tag: 'functions',
    summary: 'List a function\'s versions, newest first',
    access: 'session',
    params: { ...project, name: functionNameSchema },
    query: pageQuerySchema,
    answers: { 200: { description: 'a page of versions', json: functionVersionListSchema } },
  },
  'DELETE /v0/projects/:id/functions/:name': {
    tag: 'functions',
    summary: 'Delete a function',
    description: 'Owner session only; receipted (`function.delete`). Invocations in flight finish; every later one is 404.',
    access: 'session',
    params: { ...project, name: functionNameSchema },
    answers: { 200: { description: 'the function as it was', json: functionSchema } },
    errors: [503],
  },
  'GET /v0/projects/:id/functions/:name/logs': {
    tag: 'functions',
    summary: 'The last lines of a function\'s console',
    description: 'Owner session only. Oldest first; every value of a secret of the project is shown as `[secret NAME]` (docs/functions.md "Logs").',
    access: 'session',
    params: { ...project, name: functionNameSchema },
    query: functionLogsQuerySchema,
    answers: { 200: { description: 'the lines', json: functionLogsSchema } },
    errors: [503],
  },
  ...invokeDocs(),

  // Receipts ---------------------------------------------------------------------------------------
  'GET /v0/projects/:id/receipts': {
    tag: 'receipts',
    summary: 'List receipts, newest first',
    access: 'session',
    params: project,
    query: pageQuerySchema,
    answers: { 200: { description: 'a page of receipts', json: receiptListSchema } },
  },

  'GET /v0/receipts': {
    tag: 'receipts',
    summary: 'Receipts of one of your projects, also once it is deleted',
    description:
      'Newest first; `project` names a project of yours, live or deleted less than `SVCD_DELETED_RECEIPTS_RETENTION_DAYS` ago (docs/lifecycle.md "Deleting a project"); any other is 404.',
    access: 'session',
    query: accountReceiptsQuerySchema,
    answers: { 200: { description: 'a page of receipts', json: receiptListSchema } },
    errors: [404],
  },

  // Engine logs ------------------------------------------------------------------------------------
  'GET /v0/projects/:id/logs': {
    tag: 'logs',
    summary: 'The engine\'s recent log lines',
    description:
      'Owner session only. `tail` lines (default 100, at most 10000) of the tenant\'s engine log on its host agent, oldest first. ' +
      'With `follow=1` the answer is a Server-Sent Events stream instead: the tail, then each new line as it is written (docs/observability.md "Engine logs").',
    access: 'session',
    params: project,
    query: logsQuerySchema,
    answers: {
      200: {
        description: 'the lines, or with `follow=1` the stream',
        json: logsAnswerSchema,
        content: { type: 'text/event-stream', description: 'with `follow=1`: `event: line`, `data:` the line as a JSON string; a comment heartbeat' },
      },
    },
    errors: [503],
  },

  // Data plane -------------------------------------------------------------------------------------
  ...Object.fromEntries(
    (['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const).map((method) => [
      `${method} /v2/:path+`,
      {
        tag: 'dataplane',
        summary: `${method} to the project's engine`,
        description:
          'Served by the host agents\' `/v2` listeners (one origin with `/v0` locally): the project key selects the project, and the ' +
          'request goes to its running engine, whose answer is returned unchanged (binary product envelope, `SVCRSP01`; the ' +
          'engine\'s own errors included). `{path}` is the rest of the engine\'s path (`capabilities`, `sql`, `search`, …).',
        access: 'key',
        passThrough: true,
        params: { path: z.string().min(1) },
        headers: {
          'X-Svc-Protocol-Minor': { description: '`3`; without it the engine answers 400 itself', required: true },
          'X-Svc-Project': { description: '`prj_<16 hex>` or the bare 16 hex; must name the key\'s project (else 403)' },
        },
        rawBody: { type: '*/*', description: 'passed to the engine unchanged (`POST /v2/sql` takes `{"sql","params"}`)' },
        answers: {
          200: {
            description: 'the engine\'s answer, unchanged (any status)',
            content: { type: 'application/vnd.svc.product-v1', description: '8 bytes `SVCRSP01`, a 4-byte big-endian length N, N bytes of UTF-8 JSON' },
            headers: { 'X-Svc-Protocol-Minor': 'the engine\'s protocol minor', 'X-Svc-Request-Id': 'the engine\'s request id' },
          },
        },
        errors: [403, 409, 413, 502, 503],
      } satisfies RouteDoc,
    ]),
  ),
};

/**
 * The invocation routes, one per method and pattern (handlers/routes/functions.ts): the function's
 * own answer, relayed.
 */
function invokeDocs(): RouteDocs {
  const docs: RouteDocs = {};
  const rest = z.string().meta({ description: 'the path the function receives' });
  for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
    for (const withRest of [false, true]) {
      docs[`${method} /v0/projects/:id/functions/:name/invoke${withRest ? '/:rest+' : ''}`] = {
        tag: 'functions',
        summary: `Invoke a function (${method})`,
        description:
          'The owner session or a project key of the project (another project\'s key is 403). The function receives ' +
          'the method, the path after `/invoke`, the query, the headers (less `Authorization` and hop-by-hop ones) and ' +
          'the body, streamed; its answer is relayed unchanged with `X-Request-Id`. 429 `function_busy` (with ' +
          '`Retry-After`) when its `max_concurrency` is reached, 504 `function_timeout`, 502 `function_bad_output`, 503 ' +
          '`function_runtime_missing` (docs/functions.md "Invoke").',
        access: 'session-or-key',
        params: withRest ? { ...project, name: functionNameSchema, rest } : { ...project, name: functionNameSchema },
        rawBody: { type: '*/*', description: 'any body, streamed to the function' },
        answers: { 200: { description: 'the function\'s answer (any status)', content: { type: '*/*', description: 'what the function answered' } } },
        errors: [403, 429, 502, 503, 504],
      };
    }
  }
  return docs;
}
