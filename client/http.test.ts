/**
 * The SDK's transport against a real local HTTP server (docs/sdk.md "Requests"): idempotent reads
 * retried with backoff honouring `Retry-After`, writes never retried, timeouts and abort signals,
 * and every error answer a `SvcError` with its status, code, message and request id.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from './client.ts';
import { encodeEnvelope } from './envelope.ts';
import { SvcError } from './errors.ts';
import { retryAfterOf } from './http.ts';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
let server: Server;
let base: string;
let handler: Handler = (_req, res) => res.end();
const seen: { method: string; url: string; auth: string | undefined; at: number }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push({ method: req.method!, url: req.url!, auth: req.headers.authorization, at: Date.now() });
    handler(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

function answer(status: number, body: unknown, headers: Record<string, string> = {}): Handler {
  return (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': 'req_0123456789abcdef', ...headers });
    res.end(JSON.stringify(body));
  };
}

function sequence(...handlers: Handler[]): Handler {
  let i = 0;
  return (req, res) => handlers[Math.min(i++, handlers.length - 1)]!(req, res);
}

const project = { id: 'prj_0123456789abcdef', name: 'a', state: 'stopped', created_at: 't', updated_at: 't', native: { pin: '3.0.0', data_plane: '/v2' } };
const busy = answer(503, { error: { code: 'orchestrator_unavailable', message: 'no agent' } }, { 'retry-after': '1' });

describe('the transport', () => {
  it('retries a read after 503, waiting what Retry-After asks, and sends the session', async () => {
    seen.length = 0;
    handler = sequence(busy, answer(200, project));
    const svc = createClient({ baseUrl: `${base}/`, token: 'tok' });
    expect(await svc.projects.get(project.id)).toEqual(project);
    expect(seen.map((s) => s.url)).toEqual([`/v0/projects/${project.id}`, `/v0/projects/${project.id}`]);
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(950);
    expect(seen[0]!.auth).toBe('Bearer tok');
  });

  it('gives up after `retries` and throws the last answer as a SvcError', async () => {
    seen.length = 0;
    handler = answer(502, { error: { code: 'upstream_unavailable', message: 'engine gone' } });
    const err = await createClient({ baseUrl: base, token: 't', retries: 1 }).projects.get(project.id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SvcError);
    expect(err).toMatchObject({ status: 502, code: 'upstream_unavailable', message: 'engine gone', requestId: 'req_0123456789abcdef', source: 'service' });
    expect(seen).toHaveLength(2);
  });

  it('never retries a write', async () => {
    seen.length = 0;
    handler = sequence(busy, answer(201, project));
    await expect(createClient({ baseUrl: base, token: 't' }).projects.create({ name: 'a' })).rejects.toMatchObject({ code: 'orchestrator_unavailable', retryAfter: 1 });
    expect(seen).toHaveLength(1);
  });

  it('judges an answer that is no envelope by its status, naming what came', async () => {
    handler = (_req, res) => {
      res.writeHead(404, { 'content-type': 'text/html' });
      res.end('<h1>Not here</h1>');
    };
    await expect(createClient({ baseUrl: base, token: 't', retries: 0 }).projects.get('x')).rejects.toMatchObject({
      status: 404,
      code: 'not_found',
      message: 'unexpected answer 404 (text/html): <h1>Not here</h1>',
      requestId: null,
    });
  });

  it("reads an engine error from the product envelope, with the engine's request id", async () => {
    handler = (_req, res) => {
      res.writeHead(400, { 'content-type': 'application/vnd.svc.product-v1', 'x-svc-request-id': 'req_aaaaaaaaaaaaaaaa' });
      res.end(encodeEnvelope({ error: { code: 'sql_error', message: 'no such table: t' } }));
    };
    await expect(createClient({ baseUrl: base, key: 'k' }).sql('SELECT * FROM t')).rejects.toMatchObject({
      status: 400,
      code: 'sql_error',
      source: 'engine',
      engineRequestId: 'req_aaaaaaaaaaaaaaaa',
    });
    expect(seen.at(-1)!.auth).toBe('Bearer k');
  });

  it('times out a call that does not answer, with a TimeoutError', async () => {
    handler = () => {};
    const started = Date.now();
    const err = await createClient({ baseUrl: base, token: 't', timeoutMs: 200, retries: 0 }).projects.get('x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DOMException);
    expect((err as DOMException).name).toBe('TimeoutError');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("rejects with the signal's reason when the caller aborts", async () => {
    handler = () => {};
    const controller = new AbortController();
    const call = createClient({ baseUrl: base, token: 't' }).projects.get('x', { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('user gave up')), 50);
    await expect(call).rejects.toThrow('user gave up');
  });

  it('says which credential a route needs before sending anything', async () => {
    seen.length = 0;
    await expect(createClient({ baseUrl: base }).projects.list().first()).rejects.toThrow(/needs a session token/);
    await expect(createClient({ baseUrl: base, token: 't' }).sql('SELECT 1')).rejects.toThrow(/needs a project key/);
    expect(seen).toHaveLength(0);
    expect(() => createClient({ baseUrl: 'localhost:8787' })).toThrow(/baseUrl: must be an absolute URL/);
  });

  it('walks every page of a list, lazily', async () => {
    seen.length = 0;
    handler = (req, res) => {
      const cursor = new URL(req.url!, base).searchParams.get('cursor');
      const page = cursor === null ? { projects: [project], next_cursor: 'c2' } : { projects: [{ ...project, name: 'b' }], next_cursor: null };
      answer(200, page)(req, res);
    };
    const pages = createClient({ baseUrl: base, token: 't' }).projects.list({ limit: 1 });
    expect(seen).toHaveLength(0);
    expect((await pages.all()).map((p) => p.name)).toEqual(['a', 'b']);
    expect(seen.map((s) => s.url)).toEqual(['/v0/projects?limit=1', '/v0/projects?limit=1&cursor=c2']);
  });
});

describe('Retry-After', () => {
  it('reads seconds and HTTP dates (RFC 9110 §10.2.3)', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterOf('3', now)).toBe(3);
    expect(retryAfterOf('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5);
    expect(retryAfterOf('Wed, 31 Dec 2025 23:00:00 GMT', now)).toBe(0);
    expect(retryAfterOf('soon', now)).toBeNull();
    expect(retryAfterOf(null, now)).toBeNull();
  });
});
