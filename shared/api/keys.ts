/** Declarations: project keys (contract "POST/GET/DELETE /v0/projects/{id}/keys"). */
import { createKeyRequestSchema, issuedKeySchema, keyIdSchema, keyListSchema, keySchema } from '../schemas/keys.ts';
import { pageQuerySchema } from '../schemas/pagination.ts';
import { project } from './projects.ts';
import { route } from './route.ts';

export const issue = route({
  method: 'POST',
  path: '/v0/projects/:id/keys',
  tag: 'keys',
  summary: 'Issue a project key',
  description: 'The one answer that carries the secret `key` (`Cache-Control: no-store`); only a verifier is kept.',
  access: 'session',
  params: project,
  body: { flow: 'json', schema: createKeyRequestSchema, optional: true },
  answers: { 201: { description: 'the key, with its secret', json: issuedKeySchema } },
  errors: [409],
});

export const list = route({
  method: 'GET',
  path: '/v0/projects/:id/keys',
  tag: 'keys',
  summary: 'List project keys',
  description: 'Never the secret.',
  access: 'session',
  params: project,
  query: pageQuerySchema,
  answers: { 200: { description: 'a page of keys', json: keyListSchema } },
});

export const revoke = route({
  method: 'DELETE',
  path: '/v0/projects/:id/keys/:key_id',
  tag: 'keys',
  summary: 'Revoke a project key',
  description: 'The very next `/v2` request with it is 401. Revoking again answers 200 with the original `revoked_at`.',
  access: 'session',
  params: { ...project, key_id: keyIdSchema },
  answers: { 200: { description: 'the revoked key', json: keySchema } },
  errors: [503],
});

/** In the order they are matched. */
export const routes = [issue, list, revoke] as const;
