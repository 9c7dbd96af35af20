/**
 * CORS over HTTP through the local stack (docs/api.md "Browsers and CORS"), with an exact list of
 * allowed origins: preflights of `/v0` and `/v2` (known paths and not) answered 204 without a
 * credential; every answer to an allowed origin — errors and the engine's answers included —
 * readable by it; a disallowed origin gets the same status and body without any CORS header.
 * Needs dist/ (`npm test` builds it first).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startStack, type Stack } from '../../infra/local/stack.ts';
import { tempDir } from '../helpers/env.ts';
import { callJson } from '../helpers/http.ts';

const ALLOWED = 'http://app.example.test';
const OTHER = 'http://evil.example.test';
const dir = tempDir('svc-cors-');
let stack: Stack;
let token: string;
let project: string;
let key: string;

beforeAll(async () => {
  stack = await startStack({
    dir: dir.dir,
    dynamoEndpoint: inject('dynamoEndpoint'),
    env: {
      SVCD_TABLE: `cors_${randomBytes(6).toString('hex')}`,
      SVCD_PORT: '0',
      SVCD_AGENT_PORT: '0',
      SVCD_DATAPLANE_PORT: '0',
      SVCD_METRICS_PORT: '0',
      SVCD_CORS_ORIGINS: `${ALLOWED},http://localhost:5173`,
    },
    agentOutput: 'collect',
    log: () => {},
  });
  token = (await callJson(stack.url, 'POST', '/v0/signup', undefined, {})).token;
  project = (await callJson(stack.url, 'POST', '/v0/projects', token, { name: 'cors' })).id;
  await callJson(stack.url, 'POST', `/v0/projects/${project}/wakeup`, token);
  key = (await callJson(stack.url, 'POST', `/v0/projects/${project}/keys`, token, {})).key;
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  dir.cleanup();
});

function preflight(path: string, origin: string, method = 'POST', headers = 'authorization, content-type'): Promise<Response> {
  return fetch(`${stack.url}${path}`, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
  });
}

function corsHeaders(r: Response): Record<string, string> {
  const out: Record<string, string> = {};
  r.headers.forEach((value, name) => {
    if (name.startsWith('access-control-') || name === 'vary') out[name] = value;
  });
  return out;
}

describe('preflights', () => {
  it.each([
    ['/v0/projects', 'POST'],
    [`/v0/projects/prj_0000000000000000/storage/objects/b/k`, 'PUT'],
    ['/v0/no/such/route', 'DELETE'],
    ['/v2/sql', 'POST'],
    ['/v2/anything', 'GET'],
  ])('%s (%s) is 204 without a credential, allowing the service headers', async (path, method) => {
    const r = await preflight(path, ALLOWED, method, 'authorization, content-type, x-svc-protocol-minor, x-svc-project, range, if-none-match');
    expect(r.status).toBe(204);
    expect(await r.text()).toBe('');
    const h = corsHeaders(r);
    expect(h['access-control-allow-origin']).toBe(ALLOWED);
    expect(h['access-control-allow-methods']).toContain(method);
    for (const name of ['Authorization', 'Content-Type', 'X-Svc-Protocol-Minor', 'X-Svc-Project', 'Range', 'If-None-Match']) {
      expect(h['access-control-allow-headers']).toContain(name);
    }
    expect(Number(h['access-control-max-age'])).toBeGreaterThan(0);
    expect(h.vary).toContain('Origin');
    expect(h).not.toHaveProperty('access-control-allow-credentials');
    expect(r.headers.get('x-request-id')).toMatch(/^req_/);
  });

  it('of a disallowed origin is 204 too, with no CORS header (the browser refuses)', async () => {
    for (const path of ['/v0/projects', '/v2/sql']) {
      const r = await preflight(path, OTHER);
      expect(r.status).toBe(204);
      const h = corsHeaders(r);
      expect(h).not.toHaveProperty('access-control-allow-origin');
      expect(h).not.toHaveProperty('access-control-allow-headers');
    }
  });

  it('an OPTIONS that is not a preflight is an ordinary request', async () => {
    const r = await fetch(`${stack.url}/v0/projects`, { method: 'OPTIONS', headers: { origin: ALLOWED } });
    expect(r.status).toBe(404);
    expect(r.headers.get('access-control-allow-origin')).toBe(ALLOWED);
  });
});

describe('answers', () => {
  const exposed = ['X-Request-Id', 'ETag', 'X-Svc-Object-Id', 'X-Svc-Request-Id', 'X-Svc-Protocol-Minor', 'Content-Range', 'Retry-After'];

  it('of /v0 carry the CORS headers for an allowed origin, errors included', async () => {
    const ok = await fetch(`${stack.url}/v0/projects/${project}`, { headers: { origin: ALLOWED, authorization: `Bearer ${token}` } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('access-control-allow-origin')).toBe(ALLOWED);
    for (const name of exposed) expect(ok.headers.get('access-control-expose-headers')).toContain(name);
    for (const [path, status] of [
      [`/v0/projects/${project}`, 401],
      ['/v0/nowhere', 404],
    ] as const) {
      const r = await fetch(`${stack.url}${path}`, { headers: { origin: 'http://localhost:5173', authorization: 'Bearer nope' } });
      expect(r.status).toBe(status);
      expect(r.headers.get('access-control-allow-origin')).toBe('http://localhost:5173');
      expect(((await r.json()) as { error: { code: string } }).error.code).toBeTruthy();
    }
  });

  it('of /v2 carry them on the engine answer and on the service errors', async () => {
    const sql = await fetch(`${stack.url}/v2/sql`, {
      method: 'POST',
      headers: { origin: ALLOWED, authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
      body: JSON.stringify({ sql: 'SELECT 1' }),
    });
    expect(sql.status).toBe(200);
    expect(sql.headers.get('content-type')).toBe('application/vnd.svc.product-v1');
    expect(sql.headers.get('access-control-allow-origin')).toBe(ALLOWED);
    expect(sql.headers.get('access-control-expose-headers')).toContain('X-Svc-Request-Id');
    await sql.arrayBuffer();
    const denied = await fetch(`${stack.url}/v2/sql`, { method: 'POST', headers: { origin: ALLOWED, 'x-svc-protocol-minor': '3' }, body: '{}' });
    expect(denied.status).toBe(401);
    expect(denied.headers.get('access-control-allow-origin')).toBe(ALLOWED);
    expect(denied.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
    await denied.arrayBuffer();
  });

  it('to a disallowed origin are the same answers without any CORS header', async () => {
    const requests: [string, RequestInit][] = [
      [`/v0/projects/${project}`, { headers: { authorization: `Bearer ${token}` } }],
      [`/v0/projects/${project}`, { headers: { authorization: 'Bearer nope' } }],
      ['/v2/sql', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3' }, body: '{"sql":"SELECT 1"}' }],
    ];
    for (const [path, init] of requests) {
      const allowed = await fetch(`${stack.url}${path}`, { ...init, headers: { ...(init.headers as Record<string, string>), origin: ALLOWED } });
      const other = await fetch(`${stack.url}${path}`, { ...init, headers: { ...(init.headers as Record<string, string>), origin: OTHER } });
      expect(other.status, path).toBe(allowed.status);
      expect(other.headers.get('access-control-allow-origin'), path).toBeNull();
      expect(other.headers.get('access-control-expose-headers'), path).toBeNull();
      const [a, o] = [new Uint8Array(await allowed.arrayBuffer()), new Uint8Array(await other.arrayBuffer())];
      // The same body, but for the ids an answer is made of (request ids, the engine's own).
      expect(o.byteLength, path).toBe(a.byteLength);
    }
  });

  it('without an Origin carry no CORS header', async () => {
    const r = await fetch(`${stack.url}/v0/projects/${project}`, { headers: { authorization: `Bearer ${token}` } });
    expect(corsHeaders(r)).toEqual({});
  });
});
