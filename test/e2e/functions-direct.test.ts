/**
 * Invocations with a project key through the local stack's base URL are served by the host agent,
 * whose public listener is the stack's origin (docs/functions.md "The path through the service"; docs/local-stack.md "One origin"), with the
 * public route's rules — the key of this very project (another project's 403, a revoked one 401 on
 * the very next call), the function's name — and its answer as the client gets it from the handlers:
 * the service's request id, CORS, the function's own Content-Encoding and a HEAD's length. They are
 * never relayed to the handlers; an owner's session still is. Needs dist/worker.js
 * (`npm test` builds it first).
 */
import { gunzipSync } from 'node:zlib';
import { Pool } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { tempDir } from '../helpers/env.ts';
import { startSuiteStack } from '../helpers/stack.ts';
import { callJson } from '../helpers/http.ts';

const dir = tempDir('svc-fn-direct-');
const logged: string[] = [];
let stack: Stack;
let token: string;
let project: string;
let key: string;
let otherKey: string;

const call = (method: string, path: string, auth?: string, body?: unknown) => callJson(stack.url, method, path, auth, body);

const MODULE = `
import { gzipSync } from 'node:zlib';
export default {
  fetch(request) {
    const what = new URL(request.url).pathname;
    if (what === '/gzip') return new Response(gzipSync('zipped'), { headers: { 'content-encoding': 'gzip' } });
    if (what === '/sized') {
      const { readable, writable } = new FixedLengthStream(1234);
      const w = writable.getWriter();
      void w.write(new Uint8Array(1234)).then(() => w.close());
      return new Response(readable);
    }
    return Response.json({ method: request.method, path: what, auth: request.headers.get('authorization') }, { headers: { 'x-request-id': 'the-function-s-own' } });
  },
};`;

beforeAll(async () => {
  // The origin logs each request it relays at level debug, in the agent's log.
  stack = await startSuiteStack(dir.dir, { SVCD_LOG_LEVEL: 'debug' }, (line) => logged.push(line));
  token = (await call('POST', '/v0/signup', undefined, {})).token;
  project = (await call('POST', '/v0/projects', token, { name: 'fn-direct' })).id;
  const other = (await call('POST', '/v0/projects', token, { name: 'fn-other' })).id;
  key = (await call('POST', `/v0/projects/${project}/keys`, token, {})).key;
  otherKey = (await call('POST', `/v0/projects/${other}/keys`, token, {})).key;
  const r = await fetch(`${stack.url}/v0/projects/${project}/functions/direct`, { method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/javascript' }, body: MODULE });
  expect(r.status).toBe(201);
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  dir.cleanup();
});

/** One request on a connection of its own. */
async function fresh(method: string, path: string, headers: Record<string, string>): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  const pool = new Pool(stack.url, { connections: 1 });
  try {
    const r = await pool.request({ method: method as 'GET', path, headers });
    return { status: r.statusCode, headers: r.headers, body: Buffer.from(await r.body.arrayBuffer()) };
  } finally {
    await pool.destroy();
  }
}

const invokePath = (rest = '') => `/v0/projects/${project}/functions/direct/invoke${rest}`;
/** The origin's lines for the requests it relayed to the handlers (the agent's pino JSON lines). */
const frontSaw = (rest: string) =>
  stack
    .agentLog()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => String((JSON.parse(l) as { msg?: unknown }).msg))
    .filter((m) => m.startsWith('origin: ') && m.includes(`/v0/projects/${project}/functions/direct/invoke${rest}`));

it('serves an invocation with a project key on the agent, never relaying it, with the service request id and CORS', async () => {
  const r = await fresh('POST', invokePath('/a'), { authorization: `Bearer ${key}`, origin: 'http://page.test', 'content-type': 'text/plain', 'content-length': '2' });
  expect(r.status).toBe(200);
  expect(JSON.parse(r.body.toString())).toEqual({ method: 'POST', path: '/a', auth: null });
  expect(r.headers['x-request-id']).toMatch(/^req_/);
  expect(r.headers['access-control-allow-origin']).toBeDefined();
  expect(frontSaw('/a')).toEqual([]);
});

it('answers a HEAD with the length the function declared, and passes its Content-Encoding and bytes on', async () => {
  const head = await fresh('HEAD', invokePath('/sized'), { authorization: `Bearer ${key}` });
  expect(head.status).toBe(200);
  expect(head.headers['content-length']).toBe('1234');
  expect(head.body.length).toBe(0);
  const gzip = await fresh('GET', invokePath('/gzip'), { authorization: `Bearer ${key}`, 'accept-encoding': 'identity' });
  expect(gzip.headers['content-encoding']).toBe('gzip');
  expect(gunzipSync(gzip.body).toString()).toBe('zipped');
});

it("answers 403 to another project's key and 401 to a revoked key on the very next call", async () => {
  const foreign = await fresh('GET', invokePath('/x'), { authorization: `Bearer ${otherKey}` });
  expect(foreign.status).toBe(403);
  expect(JSON.parse(foreign.body.toString()).error.code).toBe('authorization_denied');
  const doomed = (await call('POST', `/v0/projects/${project}/keys`, token, {})).key as string;
  expect((await fresh('GET', invokePath('/y'), { authorization: `Bearer ${doomed}` })).status).toBe(200);
  const keyId = doomed.split('_')[1]!;
  const revoked = await fetch(`${stack.url}/v0/projects/${project}/keys/${keyId}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
  expect(revoked.status).toBe(200);
  const after = await fresh('GET', invokePath('/y'), { authorization: `Bearer ${doomed}` });
  expect(after.status).toBe(401);
  expect(after.headers['www-authenticate']).toBeDefined();
});

it("answers 404 for an unknown function and 400 for a name that cannot be one, as the handlers do", async () => {
  expect((await fresh('GET', `/v0/projects/${project}/functions/nope/invoke`, { authorization: `Bearer ${key}` })).status).toBe(404);
  expect((await fresh('GET', `/v0/projects/${project}/functions/NOPE!/invoke`, { authorization: `Bearer ${key}` })).status).toBe(400);
});

it("relays an owner's session to the handlers, which serve it as before", async () => {
  const r = await fresh('GET', invokePath('/session'), { authorization: `Bearer ${token}` });
  expect(r.status).toBe(200);
  expect(JSON.parse(r.body.toString())).toMatchObject({ method: 'GET', path: '/session' });
  // The origin logs a request once its answer has gone, which may be just after the client read it.
  for (let i = 0; i < 100 && frontSaw('/session').length === 0; i++) await new Promise((r) => setTimeout(r, 20));
  expect(frontSaw('/session').length).toBeGreaterThan(0);
  // By now the origin would have logged the key's invocations too, had it relayed them.
  expect(frontSaw('/a')).toEqual([]);
});
