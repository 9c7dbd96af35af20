/**
 * Realtime through the local stack's base URL when the front hands the connection to the host
 * agent (docs/realtime.md "Through the base URL, locally"): subscribe and publish are served by the
 * agent itself, with the public routes' rules — sessions that still stand, project keys of the
 * project (and revocation ending their streams), single-use tickets, no credential in a URL, the
 * publish body's limits — and the front never sees those requests. Needs dist/worker.js
 * (`npm test` builds it first).
 */
import { Agent, fetch as undiciFetch, Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startStack, type Stack } from '../../infra/local/stack.ts';
import { tempDir, uniqueTable } from '../helpers/env.ts';
import { callJson } from '../helpers/http.ts';
import { SseReader } from '../helpers/sse.ts';

const dir = tempDir('svc-rt-agent-');
const logged: string[] = [];
let stack: Stack;
let token: string;
let other: string;
let project: string;
let second: string;
let othersProject: string;

const call = (method: string, path: string, auth?: string, body?: unknown) => callJson(stack.url, method, path, auth, body);

beforeAll(async () => {
  stack = await startStack({
    dir: dir.dir,
    dynamoEndpoint: inject('dynamoEndpoint'),
    env: { SVCD_TABLE: uniqueTable('rtagent'), SVCD_PORT: '0', SVCD_AGENT_PORT: '0', SVCD_DATAPLANE_PORT: '0' },
    agentOutput: 'collect',
    log: (line) => logged.push(line),
  });
  token = (await call('POST', '/v0/signup', undefined, {})).token;
  other = (await call('POST', '/v0/signup', undefined, {})).token;
  project = (await call('POST', '/v0/projects', token, { name: 'rt-a' })).id;
  second = (await call('POST', '/v0/projects', token, { name: 'rt-b' })).id;
  othersProject = (await call('POST', '/v0/projects', other, { name: 'rt-other' })).id;
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  dir.cleanup();
});

/** Each request on a connection of its own, so each is handed over by its own first line. */
async function fresh<T>(run: (pool: Pool) => Promise<T>): Promise<T> {
  const pool = new Pool(stack.url, { connections: 1 });
  try {
    return await run(pool);
  } finally {
    await pool.destroy();
  }
}

async function publish(id: string, auth: string, body: unknown, path = `/v0/projects/${id}/realtime/publish`) {
  return fresh(async (pool) => {
    const r = await pool.request({ method: 'POST', path, headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const text = await r.body.text();
    return { status: r.statusCode, id: r.headers['x-request-id'], body: JSON.parse(text) };
  });
}

/** A subscribe on a connection of its own (its first request: the front hands it to the agent). */
function subscribe(query: string, headers: Record<string, string>, signal?: AbortSignal, id = project): Promise<Response> {
  const url = `${stack.url}/v0/projects/${id}/realtime/subscribe?${query}`;
  return undiciFetch(url, { headers, signal, dispatcher: new Agent({ connections: 1 }) }) as unknown as Promise<Response>;
}

describe('publish served by the agent', () => {
  it('answers the event as delivered, with a request id, and the front never sees it', async () => {
    const before = logged.length;
    const r = await publish(project, token, { channel: 'news', event: 'hello', payload: { n: 1 } });
    expect(r.status).toBe(200);
    expect(r.id).toMatch(/^req_[0-9a-f]{16}$/);
    expect(r.body).toMatchObject({ channel: 'news', event: 'hello', payload: { n: 1 } });
    expect(r.body.id).toBeGreaterThan(0);
    expect(logged.slice(before).filter((l) => l.includes('/realtime/publish'))).toEqual([]);
  });

  it('refuses what the public route refuses, with the same codes', async () => {
    const key = (await call('POST', `/v0/projects/${project}/keys`, token, {})).key;
    const cases: [string, Promise<{ status: number; body: any }>, number, string][] = [
      ['system channel', publish(project, token, { channel: 'system', event: 'x' }), 400, 'invalid_request'],
      ['unknown field', publish(project, token, { channel: 'a', event: 'x', extra: 1 }), 400, 'invalid_request'],
      ['a query parameter', publish(project, token, { channel: 'a', event: 'x' }, `/v0/projects/${project}/realtime/publish?x=1`), 400, 'invalid_request'],
      ['payload over 32 KiB', publish(project, token, { channel: 'a', event: 'x', payload: 'x'.repeat(33 * 1024) }), 413, 'payload_too_large'],
      ['a project key', publish(project, key, { channel: 'a', event: 'x' }), 401, 'authentication_required'],
      ['a malformed id', publish('prj_nope', token, { channel: 'a', event: 'x' }), 400, 'invalid_request'],
      ["another account's project", publish(othersProject, token, { channel: 'a', event: 'x' }), 404, 'not_found'],
      ['no credential', publish(project, '', { channel: 'a', event: 'x' }), 401, 'authentication_required'],
    ];
    for (const [what, answer, status, code] of cases) {
      const r = await answer;
      expect(r.status, what).toBe(status);
      expect(r.body.error.code, what).toBe(code);
    }
  });
});

describe('subscribe served by the agent', () => {
  it('streams to the owner session, with CORS for an allowed origin and a request id; the front never sees it', async () => {
    const before = logged.length;
    const abort = new AbortController();
    const r = await subscribe('channel=live', { authorization: `Bearer ${token}`, origin: 'http://page.test' }, abort.signal);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(r.headers.get('access-control-allow-origin')).toBe('*');
    expect(r.headers.get('x-request-id')).toMatch(/^req_/);
    const sse = new SseReader(r);
    try {
      expect(await sse.next()).toEqual({ comment: 'subscribed' });
      const sent = (await publish(project, token, { channel: 'live', event: 'e', payload: [1] })).body;
      const frame = await sse.nextEvent();
      expect(frame?.id).toBe(String(sent.id));
      expect(JSON.parse(frame!.data!)).toEqual(sent);
      expect(logged.slice(before).filter((l) => l.includes('/realtime/'))).toEqual([]);
    } finally {
      abort.abort();
      await sse.close();
    }
  });

  it('takes a key of this project, refuses one of another project (403), and ends the stream when the key is revoked', async () => {
    const k = await call('POST', `/v0/projects/${project}/keys`, token, {});
    const foreign = (await call('POST', `/v0/projects/${second}/keys`, token, {})).key;
    const denied = await subscribe('channel=c', { authorization: `Bearer ${foreign}` });
    expect(denied.status).toBe(403);
    expect(((await denied.json()) as any).error.code).toBe('authorization_denied');
    const r = await subscribe('channel=c', { authorization: `Bearer ${k.key}` });
    expect(r.status).toBe(200);
    const sse = new SseReader(r);
    expect(await sse.next()).toEqual({ comment: 'subscribed' });
    expect((await fetch(`${stack.url}/v0/projects/${project}/keys/${k.key_id}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    expect(await sse.nextEvent()).toBeNull();
    const again = await subscribe('channel=c', { authorization: `Bearer ${k.key}` });
    expect(again.status).toBe(401);
    expect(again.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
  });

  it('opens one stream per ticket, never beside an Authorization header, and refuses a credential in the URL', async () => {
    const t = await call('POST', `/v0/projects/${project}/realtime/tickets`, token, { channels: ['t'] });
    const both = await subscribe(`channel=t&ticket=${t.ticket}`, { authorization: `Bearer ${token}` });
    expect(both.status).toBe(400);
    const inUrl = await subscribe(`channel=t&token=${token}`, {});
    expect(inUrl.status).toBe(400);
    expect(await inUrl.text()).not.toContain(token);
    const notGranted = await subscribe(`channel=other&ticket=${t.ticket}`, {});
    expect(notGranted.status).toBe(403);
    const abort = new AbortController();
    const r = await subscribe(`channel=t&ticket=${t.ticket}`, {}, abort.signal);
    expect(r.status).toBe(200);
    const sse = new SseReader(r);
    try {
      expect(await sse.next()).toEqual({ comment: 'subscribed' });
      const used = await subscribe(`channel=t&ticket=${t.ticket}`, {});
      expect(used.status).toBe(401);
      await publish(project, token, { channel: 't', event: 'by-ticket' });
      expect((await sse.nextEvent())?.event).toBe('by-ticket');
    } finally {
      abort.abort();
      await sse.close();
    }
  });

  it('refuses a session that was signed out, and a query it does not know', async () => {
    const session = (await call('POST', '/v0/signup', undefined, {})).token;
    const own = (await call('POST', '/v0/projects', session, { name: 'rt-signed-out' })).id;
    const unknown = await subscribe('channel=a&nope=1', { authorization: `Bearer ${session}` }, undefined, own);
    expect(unknown.status).toBe(400);
    expect((await fetch(`${stack.url}/v0/sessions/current`, { method: 'DELETE', headers: { authorization: `Bearer ${session}` } })).status).toBe(204);
    const ended = await subscribe('channel=a', { authorization: `Bearer ${session}` }, undefined, own);
    expect(ended.status).toBe(401);
  });
});
