/**
 * Functions end to end against DynamoDB Local and a real host agent running real worker processes
 * (docs/functions.md): deploy, list, read, versions, delete; invocation with the owner's session and
 * with a project key (method, path, query, headers, bodies streamed both ways); the environment and
 * its secrets; every `function_*` error produced for real; logs and their redaction; the
 * authorization matrix of every function route. One service and one agent for the whole file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

let svc: TestService;
let token: string;
let otherToken: string;
let project: string;
let key: string;

beforeAll(async () => {
  svc = await startTestService();
  ({ token } = await signup(svc));
  ({ token: otherToken } = await signup(svc));
  project = await newProject();
  key = await newKey(project);
});
afterAll(() => svc?.stop());

async function newProject(t = token): Promise<string> {
  const r = await svc.request('POST', '/v0/projects', { token: t, body: { name: 'fn' } });
  expect(r.status).toBe(201);
  return ((await r.json()) as { id: string }).id;
}

async function newKey(p: string): Promise<string> {
  const r = await svc.request('POST', `/v0/projects/${p}/keys`, { token, body: {} });
  expect(r.status).toBe(201);
  return ((await r.json()) as { key: string }).key;
}

const fnPath = (p: string, name?: string, rest = '') => `/v0/projects/${p}/functions${name === undefined ? '' : `/${name}`}${rest}`;

/** Deploys `source` as function `name` of `p`; answers the raw response. */
function deploy(p: string, name: string, source: string, query = '', t = token): Promise<Response> {
  return svc.app.fetch(
    new Request(`http://svc.test${fnPath(p, name)}${query}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${t}`, 'content-type': 'application/javascript' },
      body: source,
    }),
  );
}

async function deployed(p: string, name: string, source: string, query = ''): Promise<Record<string, unknown>> {
  const r = await deploy(p, name, source, query);
  expect(r.status, await r.clone().text()).toBeLessThan(300);
  return (await r.json()) as Record<string, unknown>;
}

function invoke(p: string, name: string, rest = '', init: RequestInit & { auth?: string | null } = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const auth = init.auth === undefined ? token : init.auth;
  if (auth !== null) headers.set('authorization', `Bearer ${auth}`);
  return svc.app.fetch(new Request(`http://svc.test${fnPath(p, name, `/invoke${rest}`)}`, { ...init, headers, ...(init.body instanceof ReadableStream ? { duplex: 'half' } : {}) } as RequestInit));
}

async function errorOf(r: Response): Promise<{ code: string; message: string }> {
  return ((await r.json()) as { error: { code: string; message: string } }).error;
}

const ECHO = `
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const body = await request.text();
    return Response.json({
      method: request.method,
      path: url.pathname,
      query: url.search,
      origin: url.origin,
      headers: Object.fromEntries(request.headers),
      body,
      env: { PROJECT_ID: env.PROJECT_ID, FUNCTION_NAME: env.FUNCTION_NAME, CLOUD_ORIGIN: env.CLOUD_ORIGIN },
      processEnv: { PROJECT_ID: process.env.PROJECT_ID, FUNCTION_NAME: process.env.FUNCTION_NAME, CLOUD_ORIGIN: process.env.CLOUD_ORIGIN },
    }, { status: 201, headers: { 'x-fn': 'yes', 'set-cookie': 'a=1' } });
  },
};`;

describe('deploy, read, list, versions, delete', () => {
  it('creates with 201, then a new version with 200, every field of the record', async () => {
    const p = await newProject();
    const r1 = await deploy(p, 'hello', ECHO);
    expect(r1.status).toBe(201);
    const v1 = (await r1.json()) as Record<string, unknown>;
    expect(Object.keys(v1).sort()).toEqual(
      ['created_at', 'max_concurrency', 'memory_mb', 'name', 'project', 'sha256', 'size', 'timeout_ms', 'updated_at', 'version'].sort(),
    );
    expect(v1).toMatchObject({ project: p, name: 'hello', version: 1, size: Buffer.byteLength(ECHO), timeout_ms: 10000, memory_mb: 128, max_concurrency: 8 });
    expect(v1.sha256).toMatch(/^[0-9a-f]{64}$/);
    const r2 = await deploy(p, 'hello', `${ECHO}\n// v2`, '?timeout_ms=2000&memory_mb=64&max_concurrency=2');
    expect(r2.status).toBe(200);
    const v2 = (await r2.json()) as Record<string, unknown>;
    expect(v2).toMatchObject({ version: 2, timeout_ms: 2000, memory_mb: 64, max_concurrency: 2, created_at: v1.created_at });
    expect(v2.sha256).not.toBe(v1.sha256);

    const got = await svc.request('GET', fnPath(p, 'hello'), { token });
    expect(got.status).toBe(200);
    expect(await got.json()).toEqual(v2);

    const list = await svc.request('GET', fnPath(p), { token });
    expect(await list.json()).toEqual({ functions: [v2], next_cursor: null });

    const versions = (await (await svc.request('GET', fnPath(p, 'hello', '/versions'), { token })).json()) as { versions: Record<string, unknown>[] };
    expect(versions.versions.map((v) => v.version)).toEqual([2, 1]);
    expect(versions.versions[1]).toMatchObject({ sha256: v1.sha256, timeout_ms: 10000 });

    const receipts = (await (await svc.request('GET', `/v0/projects/${p}/receipts`, { token })).json()) as { receipts: { op: string; target: string }[] };
    expect(receipts.receipts.filter((x) => x.op === 'function.deploy').map((x) => x.target)).toEqual(['hello@2', 'hello@1']);

    const del = await svc.request('DELETE', fnPath(p, 'hello'), { token });
    expect(del.status).toBe(200);
    expect(await del.json()).toEqual(v2);
    expect((await svc.request('GET', fnPath(p, 'hello'), { token })).status).toBe(404);
    expect((await svc.request('DELETE', fnPath(p, 'hello'), { token })).status).toBe(404);
    expect((await invoke(p, 'hello')).status).toBe(404);

    // Deployed again: a new function, version 1, no old version listed.
    expect((await deploy(p, 'hello', ECHO)).status).toBe(201);
    const again = (await (await svc.request('GET', fnPath(p, 'hello', '/versions'), { token })).json()) as { versions: unknown[] };
    expect(again.versions).toHaveLength(1);
  });

  it('refuses a module that does not parse, or has no default fetch, naming the problem', async () => {
    const p = project;
    const syntax = await deploy(p, 'broken', 'export default { fetch( { }');
    expect(syntax.status).toBe(400);
    expect((await errorOf(syntax)).message).toMatch(/^body: SyntaxError/);
    const noFetch = await deploy(p, 'broken', 'export default { hello() {} }');
    expect(noFetch.status).toBe(400);
    expect((await errorOf(noFetch)).message).toMatch(/no default export with a fetch method/);
    const throws = await deploy(p, 'broken', 'throw new Error("boom at load")');
    expect((await errorOf(throws)).message).toMatch(/boom at load/);
    expect((await svc.request('GET', fnPath(p, 'broken'), { token })).status).toBe(404);
  });

  it('refuses bad names, settings, types and sizes', async () => {
    expect((await errorOf(await deploy(project, 'Bad_Name', ECHO))).message).toMatch(/^name: must match/);
    expect((await errorOf(await deploy(project, 'secrets', ECHO))).message).toMatch(/^name: is reserved/);
    expect((await errorOf(await deploy(project, 'ok', ECHO, '?timeout_ms=99'))).message).toBe('timeout_ms: must be a whole number from 100 to 60000');
    expect((await errorOf(await deploy(project, 'ok', ECHO, '?memory_mb=2048'))).message).toBe('memory_mb: must be a whole number from 32 to 1024');
    expect((await errorOf(await deploy(project, 'ok', ECHO, '?max_concurrency=0'))).message).toBe('max_concurrency: must be a whole number from 1 to 64');
    expect((await errorOf(await deploy(project, 'ok', ECHO, '?other=1'))).message).toBe('other: is not a known query parameter');
    const wrongType = await svc.app.fetch(
      new Request(`http://svc.test${fnPath(project, 'ok')}`, { method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' }, body: ECHO }),
    );
    expect((await errorOf(wrongType)).message).toMatch(/^content-type: must be application\/javascript or text\/javascript/);
    expect((await errorOf(await deploy(project, 'ok', ''))).message).toBe('body: the module is empty');
    const big = await deploy(project, 'ok', `// ${'x'.repeat(10 * 1024 * 1024)}`);
    expect(big.status).toBe(413);
    expect((await errorOf(big)).code).toBe('payload_too_large');
  });
});

describe('invoke', () => {
  beforeAll(async () => {
    await deployed(project, 'echo', ECHO);
  });

  it('hands the function the method, path remainder, query, headers and body, and relays its answer', async () => {
    const r = await invoke(project, 'echo', '/users/1?x=2&y=%20', {
      method: 'POST',
      headers: { 'x-custom': 'abc', 'content-type': 'text/plain', connection: 'keep-alive, x-hop', 'x-hop': 'gone', 'x-request-id': 'client-chosen' },
      body: 'payload',
    });
    expect(r.status).toBe(201);
    expect(r.headers.get('x-fn')).toBe('yes');
    expect(r.headers.get('set-cookie')).toBe('a=1');
    expect(r.headers.get('x-request-id')).toMatch(/^req_/);
    const seen = (await r.json()) as { method: string; path: string; query: string; origin: string; headers: Record<string, string>; body: string; env: Record<string, string>; processEnv: Record<string, string> };
    expect(seen).toMatchObject({ method: 'POST', path: '/users/1', query: '?x=2&y=%20', origin: 'http://svc.test', body: 'payload' });
    expect(seen.headers['x-custom']).toBe('abc');
    expect(seen.headers['content-type']).toBe('text/plain');
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-hop']).toBeUndefined();
    expect(seen.headers['x-request-id']).toBe(r.headers.get('x-request-id'));
    expect(Object.keys(seen.headers).filter((h) => h.startsWith('x-svc-'))).toEqual([]);
    const expectedEnv = { PROJECT_ID: project, FUNCTION_NAME: 'echo', CLOUD_ORIGIN: 'http://svc.test' };
    expect(seen.env).toEqual(expectedEnv);
    expect(seen.processEnv).toEqual(expectedEnv);
  });

  it('takes a project key of the project, with every method', async () => {
    for (const method of ['GET', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
      const r = await invoke(project, 'echo', '', { method, auth: key });
      expect(r.status, method).toBe(201);
      expect(((await r.json()) as { method: string; path: string }).path).toBe('/');
    }
    const head = await invoke(project, 'echo', '/x', { method: 'HEAD', auth: key });
    expect(head.status).toBe(201);
    expect(await head.text()).toBe('');
  });
});
