/**
 * One base URL (docs/dataplane.md "One base URL"): in the local stack, `{base_url}/v0/...` reaches the
 * handlers in miniflare and `{base_url}/v2/...` the host agent, which is the stack's origin
 * (docs/local-stack.md "One origin": it serves `/v2` itself and relays `/v0` to the handlers). Runs the stack as `npm start` does (the handlers
 * bundle dist/worker.js, built by `npm test`), on the run's DynamoDB Local and a fresh table.
 */
import { connect } from 'node:net';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { startStack, type Stack } from '../../infra/local/stack.ts';
import { listAgents } from '../../shared/db/agents.ts';
import { createDb } from '../../shared/db/client.ts';
import { tempDir, uniqueTable } from '../helpers/env.ts';
import { callJson } from '../helpers/http.ts';

const dir = tempDir('svc-stack-');
const logged: string[] = [];
let stack: Stack;
let token: string;
let projectId: string;
let key: string;

const call = (method: string, path: string, auth?: string, body?: unknown) => callJson(stack.url, method, path, auth, body);

beforeAll(async () => {
  stack = await startStack({
    dir: dir.dir,
    dynamoEndpoint: inject('dynamoEndpoint'),
    env: { SVCD_TABLE: uniqueTable(), SVCD_PORT: '0', SVCD_AGENT_PORT: '0', SVCD_DATAPLANE_PORT: '0' },
    log: (line) => logged.push(line),
  });
  token = (await call('POST', '/v0/signup', undefined, {})).token;
  projectId = (await call('POST', '/v0/projects', token, { name: 'one-origin' })).id;
  await call('POST', `/v0/projects/${projectId}/wakeup`, token);
  key = (await call('POST', `/v0/projects/${projectId}/keys`, token, {})).key;
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  dir.cleanup();
});

describe('the local stack serves /v0 and /v2 on one origin', () => {
  it('/v2 with a project key reaches the engine through the agent', async () => {
    const w = await fetch(`${stack.url}/v2/sql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
      body: JSON.stringify({ sql: 'SELECT 41 + 1 AS answer' }),
    });
    expect(w.status).toBe(200);
    expect(w.headers.get('content-type')).toBe('application/vnd.svc.product-v1');
    expect(w.headers.get('x-svc-protocol-minor')).toBe('3');
    const bytes = Buffer.from(await w.arrayBuffer());
    expect(bytes.subarray(0, 8).toString('latin1')).toBe('SVCRSP01');
    expect(bytes.toString('utf8')).toContain('42');
  });

  it("sends /v2 to the agent's registered /v2 listener, which is not the public origin", async () => {
    const agents = await listAgents(createDb(stack.settings));
    expect(agents).toHaveLength(1);
    const listener = agents[0]!.dataplane_url;
    expect(listener).not.toBe(stack.url);
    const direct = await fetch(`${listener}/v2/capabilities`, { headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3' } });
    expect(direct.status).toBe(200);
  });

  it("/v2 errors are the agent's: a session token is 401 with the challenge and a request id", async () => {
    const r = await fetch(`${stack.url}/v2/capabilities`, { headers: { authorization: `Bearer ${token}`, 'x-svc-protocol-minor': '3' } });
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
    expect(r.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{16}$/);
    expect(((await r.json()) as any).error.code).toBe('authentication_required');
  });

  it('a duplicated Authorization header reaches the agent as two headers (401), not folded into one', async () => {
    const socket = connect(Number(new URL(stack.url).port), '127.0.0.1');
    socket.write(
      `GET /v2/capabilities HTTP/1.1\r\nhost: x\r\nx-svc-protocol-minor: 3\r\nauthorization: Bearer ${key}\r\nauthorization: Bearer ${key}\r\nconnection: close\r\n\r\n`,
    );
    const raw = await new Promise<string>((r) => {
      let text = '';
      socket.setEncoding('latin1').on('data', (d: string) => (text += d)).on('close', () => r(text));
    });
    expect(raw).toMatch(/^HTTP\/1\.1 401 /);
    expect(raw).toContain('authentication_required');
  });

  it('/v0 still reaches the handlers, and a project key there is 401', async () => {
    const h = await fetch(`${stack.url}/v0/health`);
    expect(h.status).toBe(200);
    const p = await fetch(`${stack.url}/v0/projects/${projectId}`, { headers: { authorization: `Bearer ${key}` } });
    expect(p.status).toBe(401);
    const ok = await fetch(`${stack.url}/v0/projects/${projectId}`, { headers: { authorization: `Bearer ${token}` } });
    expect(ok.status).toBe(200);
  });

  it('/v2 costs one hop: the agent serves the origin, so no front sees it', async () => {
    const before = logged.length;
    const pool = new Pool(stack.url, { connections: 1 });
    try {
      for (let i = 0; i < 3; i++) {
        const r = await pool.request({ method: 'GET', path: '/v2/capabilities', headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3' } });
        await r.body.arrayBuffer();
        expect(r.statusCode).toBe(200);
      }
    } finally {
      await pool.close();
    }
    // The supervisor's fallback front logs every request it serves; these never reached it.
    expect(logged.slice(before).filter((l) => l.startsWith('front: ') && l.includes(' /v2'))).toEqual([]);
  });

  it('a connection that starts with /v2 carries /v0 requests too, relayed to the handlers', async () => {
    const pool = new Pool(stack.url, { connections: 1 });
    const send = async (method: string, path: string, auth: string, body?: string) => {
      const r = await pool.request({ method: method as 'GET', path, headers: { authorization: `Bearer ${auth}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' }, body });
      return { status: r.statusCode, id: r.headers['x-request-id'], text: await r.body.text() };
    };
    try {
      expect((await send('POST', '/v2/sql', key, JSON.stringify({ sql: 'SELECT 41 + 1 AS answer' }))).text).toContain('42');
      const project = await send('GET', `/v0/projects/${projectId}`, token);
      expect(project.status).toBe(200);
      expect(JSON.parse(project.text).id).toBe(projectId);
      expect(project.id).toMatch(/^req_/);
      const created = await send('POST', '/v0/projects', token, JSON.stringify({ name: 'on-a-handed-connection' }));
      expect(created.status).toBe(201);
      expect((await send('GET', '/v0/nowhere', token)).status).toBe(404);
      expect((await send('GET', '/v2/capabilities', key)).status).toBe(200);
      expect((await send('GET', '/v0/health', token)).status).toBe(200);
    } finally {
      await pool.close();
    }
  });

  it('revoking through /v0 refuses the very next /v2 request on the same origin', async () => {
    const k = await call('POST', `/v0/projects/${projectId}/keys`, token, { label: 'short-lived' });
    const h = { authorization: `Bearer ${k.key}`, 'x-svc-protocol-minor': '3' };
    expect((await fetch(`${stack.url}/v2/capabilities`, { headers: h })).status).toBe(200);
    const del = await fetch(`${stack.url}/v0/projects/${projectId}/keys/${k.key_id}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
    expect(del.status).toBe(200);
    expect((await fetch(`${stack.url}/v2/capabilities`, { headers: h })).status).toBe(401);
  });
});
