/**
 * Declarations: the data plane, `/v2` (docs/dataplane.md): served by the host agents' `/v2`
 * listeners, which pass the request to the project's engine and its answer back unchanged.
 */
import { z } from 'zod';
import { route, type Method } from './route.ts';

/** The methods `/v2` passes on. */
export const DATAPLANE_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const satisfies readonly Method[];

function passThrough<M extends Method>(method: M) {
  return route({
    method,
    path: '/v2/:path+',
    tag: 'dataplane',
    summary: `${method} to the project's engine`,
    description:
      'Served by the host agents\' `/v2` listeners (one origin with `/v0` locally): the project key selects the project, and the ' +
      'request goes to its running engine, whose answer is returned unchanged (binary product envelope, `SVCRSP01`; the ' +
      'engine\'s own errors included). `{path}` is the rest of the engine\'s path (`capabilities`, `sql`, `search`, …).',
    access: 'key',
    servedBy: 'agent',
    params: { path: z.string().min(1) },
    query: 'forwarded',
    headers: {
      'X-Svc-Protocol-Minor': { description: '`3`; without it the engine answers 400 itself', required: true },
      'X-Svc-Project': { description: '`prj_<16 hex>` or the bare 16 hex; must name the key\'s project (else 403)' },
    },
    body: { flow: 'stream', media: { type: '*/*', description: 'passed to the engine unchanged (`POST /v2/sql` takes `{"sql","params"}`)' } },
    answers: {
      200: {
        description: 'the engine\'s answer, unchanged (any status)',
        content: { type: 'application/vnd.svc.product-v1', description: '8 bytes `SVCRSP01`, a 4-byte big-endian length N, N bytes of UTF-8 JSON' },
        headers: { 'X-Svc-Protocol-Minor': 'the engine\'s protocol minor', 'X-Svc-Request-Id': 'the engine\'s request id' },
      },
    },
    answerFlow: 'stream',
    errors: [403, 409, 413, 502, 503],
  });
}

/** `/v2/:path+`, one declaration per method. */
export const routes = DATAPLANE_METHODS.map(passThrough);
