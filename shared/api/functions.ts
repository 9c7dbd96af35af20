/** Declarations: functions (docs/functions.md; the four `function_*` codes of the contract's "Errors"). */
import { z } from 'zod';
import { pageQuerySchema } from '../schemas/pagination.ts';
import {
  deployQuerySchema,
  functionListSchema,
  functionLogsQuerySchema,
  functionLogsSchema,
  functionNameSchema,
  functionSchema,
  functionVersionListSchema,
} from '../schemas/functions.ts';
import { project } from './projects.ts';
import { route, type Method } from './route.ts';

const fn = { ...project, name: functionNameSchema };

export const deploy = route({
  method: 'PUT',
  path: '/v0/projects/:id/functions/:name',
  tag: 'functions',
  summary: 'Deploy a function (a new version)',
  description:
    'Owner session only. The body is one JavaScript ES module, already bundled, whose default export has ' +
    '`fetch(request, env, ctx)`; at most `SVCD_FUNCTION_MAX_BYTES` (413). A module that does not load or has no ' +
    'default `fetch` is 400 naming the problem. Every deploy is a new immutable version; receipted ' +
    '(`function.deploy`). Settings not given take their defaults (docs/functions.md).',
  access: 'session',
  params: fn,
  query: deployQuerySchema,
  headers: { 'Content-Type': { description: '`application/javascript` or `text/javascript`', required: true } },
  body: { flow: 'bytes', media: { type: 'application/javascript', description: 'the module\'s source' } },
  answers: { 201: { description: 'a new function', json: functionSchema }, 200: { description: 'a new version', json: functionSchema } },
  errors: [409, 413, 503],
});

export const list = route({
  method: 'GET',
  path: '/v0/projects/:id/functions',
  tag: 'functions',
  summary: 'List functions, by name',
  access: 'session',
  params: project,
  query: pageQuerySchema,
  answers: { 200: { description: 'a page of functions', json: functionListSchema } },
});

export const read = route({
  method: 'GET',
  path: '/v0/projects/:id/functions/:name',
  tag: 'functions',
  summary: 'Read a function (its current version)',
  access: 'session',
  params: fn,
  answers: { 200: { description: 'the function', json: functionSchema } },
});

export const versions = route({
  method: 'GET',
  path: '/v0/projects/:id/functions/:name/versions',
  tag: 'functions',
  summary: 'List a function\'s versions, newest first',
  access: 'session',
  params: fn,
  query: pageQuerySchema,
  answers: { 200: { description: 'a page of versions', json: functionVersionListSchema } },
});

export const remove = route({
  method: 'DELETE',
  path: '/v0/projects/:id/functions/:name',
  tag: 'functions',
  summary: 'Delete a function',
  description: 'Owner session only; receipted (`function.delete`). Invocations in flight finish; every later one is 404.',
  access: 'session',
  params: fn,
  answers: { 200: { description: 'the function as it was', json: functionSchema } },
  errors: [503],
});

export const logs = route({
  method: 'GET',
  path: '/v0/projects/:id/functions/:name/logs',
  tag: 'functions',
  summary: 'The last lines of a function\'s console',
  description: 'Owner session only. Oldest first; every value of a secret of the project is shown as `[secret NAME]` (docs/functions.md "Logs").',
  access: 'session',
  params: fn,
  query: functionLogsQuerySchema,
  answers: { 200: { description: 'the lines', json: functionLogsSchema } },
  errors: [503],
});

/** The methods an invocation may use (a preflight is answered by the service, docs/api.md "Browsers and CORS"). */
export const INVOKE_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const satisfies readonly Method[];

const rest = z.string().meta({ description: 'the path the function receives' });

/** One invocation route: `…/invoke`, or with the rest of the path the function receives. */
function invokeRoute<M extends Method, P extends string, const Params extends Record<string, z.ZodType>>(method: M, path: P, params: Params) {
  return route({
    method,
    path,
    tag: 'functions',
    summary: `Invoke a function (${method})`,
    description:
      'The owner session or a project key of the project (another project\'s key is 403). The function receives ' +
      'the method, the path after `/invoke`, the query, the headers (less `Authorization` and hop-by-hop ones) and ' +
      'the body, streamed; its answer is relayed unchanged with `X-Request-Id`. 429 `function_busy` (with ' +
      '`Retry-After`) when its `max_concurrency` is reached, 504 `function_timeout`, 502 `function_bad_output`, 503 ' +
      '`function_runtime_missing` (docs/functions.md "Invoke").',
    access: 'session-or-key',
    params,
    query: 'forwarded',
    body: { flow: 'stream', media: { type: '*/*', description: 'any body, streamed to the function' } },
    answers: { 200: { description: 'the function\'s answer (any status)', content: { type: '*/*', description: 'what the function answered' } } },
    answerFlow: 'stream',
    errors: [403, 429, 501, 502, 503, 504],
  });
}

/** The invocation routes, per method: `…/invoke` and `…/invoke/:rest+`. */
export const invoke = INVOKE_METHODS.flatMap((method) => [
  invokeRoute(method, '/v0/projects/:id/functions/:name/invoke', fn),
  invokeRoute(method, '/v0/projects/:id/functions/:name/invoke/:rest+', { ...fn, rest }),
]);

/** In the order they are matched. */
export const routes = [deploy, list, read, versions, remove, logs, ...invoke] as const;
