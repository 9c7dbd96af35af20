/**
 * Declarations: resumable uploads, TUS 1.0.0 with the creation, creation-with-upload, termination
 * and expiration extensions (https://tus.io/protocols/resumable-upload; docs/storage.md "Resumable
 * uploads"). Re-exported by ./storage.ts, whose namespace they belong to.
 */
import { uploadIdSchema } from '../schemas/resumable.ts';
import { project } from './projects.ts';
import { route, type RequestBody } from './route.ts';

const upload = { ...project, upload: uploadIdSchema };
const DOC = 'docs/storage.md "Resumable uploads"';

const tusBytes: RequestBody = { flow: 'bytes', media: { type: 'application/offset+octet-stream', description: 'bytes of the upload, from `Upload-Offset`' } };
const tusResumable = { 'Tus-Resumable': { description: '`1.0.0`', required: true } } as const;
const expires = { 'Upload-Expires': 'when the unfinished upload expires (an HTTP-date)' };

export const resumableOptions = route({
  method: 'OPTIONS',
  path: '/v0/projects/:id/storage/resumable',
  tag: 'storage',
  summary: 'TUS discovery',
  description: `What the resumable upload endpoint supports; no credential (${DOC}).`,
  access: 'none',
  params: project,
  answers: { 204: { description: 'the protocol', headers: { 'Tus-Version': '`1.0.0`', 'Tus-Extension': 'the extensions', 'Tus-Max-Size': '`SVCD_STORAGE_MAX_OBJECT_BYTES`' } } },
});

export const createResumable = route({
  method: 'POST',
  path: '/v0/projects/:id/storage/resumable',
  tag: 'storage',
  summary: 'Create a resumable upload (TUS)',
  description:
    '`Upload-Length` bytes, at most `SVCD_STORAGE_MAX_OBJECT_BYTES`; `Upload-Metadata` names `bucket`, `key` (or `filename`) and ' +
    `\`content_type\` (or \`filetype\`). The body may carry the first bytes. Answers the upload's path in \`Location\` (${DOC}).`,
  access: 'session',
  params: project,
  headers: {
    ...tusResumable,
    'Upload-Length': { description: 'the object\'s size in bytes', required: true },
    'Upload-Metadata': { description: 'TUS metadata: `bucket`, `key`, `content_type` (base64 values)', required: true },
  },
  body: tusBytes,
  answers: { 201: { description: 'created', headers: { Location: 'the upload\'s path', 'Upload-Offset': 'bytes kept of the body', ...expires } } },
  errors: [409, 413, 502, 503],
});

export const headResumable = route({
  method: 'HEAD',
  path: '/v0/projects/:id/storage/resumable/:upload',
  tag: 'storage',
  summary: 'Where a resumable upload stands (TUS)',
  description: `404 once it expired or was terminated (${DOC}).`,
  access: 'session',
  params: upload,
  headers: tusResumable,
  answers: {
    200: {
      description: 'its offset',
      headers: { 'Upload-Offset': 'bytes received', 'Upload-Length': 'the object\'s size', 'Upload-Metadata': 'as created', 'Cache-Control': '`no-store`', ...expires },
    },
  },
  errors: [502, 503],
});

export const patchResumable = route({
  method: 'PATCH',
  path: '/v0/projects/:id/storage/resumable/:upload',
  tag: 'storage',
  summary: 'Append to a resumable upload (TUS)',
  description:
    '`Upload-Offset` must be the upload\'s (409 otherwise); `Content-Length` at most `SVCD_STORAGE_MAX_BYTES` (413). The PATCH that brings ' +
    `the last byte answers once the object is stored, as a PUT stores it (receipted) (${DOC}).`,
  access: 'session',
  params: upload,
  headers: { ...tusResumable, 'Upload-Offset': { description: 'where the body starts', required: true } },
  body: tusBytes,
  answers: { 204: { description: 'appended', headers: { 'Upload-Offset': 'the new offset', ...expires } } },
  errors: [409, 413, 502, 503],
});

export const deleteResumable = route({
  method: 'DELETE',
  path: '/v0/projects/:id/storage/resumable/:upload',
  tag: 'storage',
  summary: 'Terminate a resumable upload (TUS)',
  description: `Its bytes are removed; a completed upload's object stays (${DOC}).`,
  access: 'session',
  params: upload,
  headers: tusResumable,
  answers: { 204: { description: 'terminated' } },
  errors: [502, 503],
});

/** Resumable uploads, in the order they are matched. */
export const resumableRoutes = [resumableOptions, createResumable, headResumable, patchResumable, deleteResumable] as const;
