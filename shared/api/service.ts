/** Declarations: health, the API document and the web console (docs/api.md, docs/console.md). */
import { z } from 'zod';
import { degradedHealthAnswerSchema, healthAnswerSchema } from '../schemas/health.ts';
import { route } from './route.ts';

export const health = route({
  method: 'GET',
  path: '/v0/health',
  tag: 'service',
  summary: 'Health of the service',
  description: 'No credential. 200 while at least one registered host agent is live; else 503 with the error envelope beside the same figures (docs/api.md "Decisions": health). Its query is ignored.',
  access: 'none',
  ignoresInput: true,
  answers: {
    200: { description: 'serving', json: healthAnswerSchema },
    503: { description: 'degraded: no host agent can run tenants', json: degradedHealthAnswerSchema },
  },
});

export const openApi = route({
  method: 'GET',
  path: '/v0/openapi.json',
  tag: 'service',
  summary: 'This API as an OpenAPI 3.1 document',
  description: 'No credential. Generated from the same declarations that route and validate requests (docs/api.md "How the reference is made").',
  access: 'none',
  answers: { 200: { description: 'the document', content: { type: 'application/json', description: 'an OpenAPI 3.1 document' } } },
  answerFlow: 'json',
});

export const consolePage = route({
  method: 'GET',
  path: '/console',
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
  answerFlow: 'text',
  errors: [404],
});

export const consoleFile = route({
  method: 'GET',
  path: '/console/:file',
  tag: 'service',
  summary: 'A script or stylesheet of the web console',
  description: 'No credential. Names carry their content hash and are cached for a year (docs/console.md).',
  access: 'none',
  params: { file: z.string() },
  answers: {
    200: { description: 'the file', content: { type: 'text/javascript', description: 'a script or a stylesheet' }, headers: { ETag: 'validator' } },
    304: { description: 'not modified (If-None-Match)' },
  },
  answerFlow: 'text',
  errors: [404],
});
