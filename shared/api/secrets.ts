/** Declarations: function secrets (contract "PUT /v0/projects/{id}/functions/secrets/{name}"; docs/secrets.md). */
import { pageQuerySchema } from '../schemas/pagination.ts';
import { putSecretRequestSchema, secretListSchema, secretMetadataSchema, secretNameSchema } from '../schemas/secrets.ts';
import { project } from './projects.ts';
import { route } from './route.ts';

const secret = { ...project, name: secretNameSchema };

export const put = route({
  method: 'PUT',
  path: '/v0/projects/:id/functions/secrets/:name',
  tag: 'secrets',
  summary: 'Create or rotate a function secret',
  description: 'Owner session only. 201 created, 200 rotated (version incremented); receipted with the name only. The value is never answered.',
  access: 'session',
  params: secret,
  body: { flow: 'json', schema: putSecretRequestSchema },
  answers: { 201: { description: 'created', json: secretMetadataSchema }, 200: { description: 'rotated', json: secretMetadataSchema } },
  errors: [409, 501, 503],
});

export const list = route({
  method: 'GET',
  path: '/v0/projects/:id/functions/secrets',
  tag: 'secrets',
  summary: 'List function secrets (metadata)',
  access: 'session',
  params: project,
  query: pageQuerySchema,
  answers: { 200: { description: 'a page of secrets\' metadata', json: secretListSchema } },
});

export const read = route({
  method: 'GET',
  path: '/v0/projects/:id/functions/secrets/:name',
  tag: 'secrets',
  summary: 'Read a function secret\'s metadata',
  access: 'session',
  params: secret,
  answers: { 200: { description: 'the metadata', json: secretMetadataSchema } },
});

export const remove = route({
  method: 'DELETE',
  path: '/v0/projects/:id/functions/secrets/:name',
  tag: 'secrets',
  summary: 'Delete a function secret',
  description: 'Receipted (`secret.delete`).',
  access: 'session',
  params: secret,
  answers: { 200: { description: 'the deleted secret\'s metadata', json: secretMetadataSchema } },
  errors: [409, 503],
});

/** In the order they are matched (before the functions': `…/functions/secrets` is not a function). */
export const routes = [put, list, read, remove] as const;
