/**
 * Several host agents behind one base URL (docs/dataplane.md "Several agents"): the local stack as
 * `npm start -- --agents 2` runs it (two agent processes, each with its own root and ports, one
 * DynamoDB table, the handlers in miniflare, the first agent serving the base URL and forwarding
 * `/v2` for the other's projects in one hop). Needs dist/worker.js (`npm test` builds it first).
 *
 * Heartbeats every 300 ms and staleness after 1.5 s, so killing an agent shows within seconds.
 */
import { checkedJson } from '../helpers/openapi.ts';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack, StackAgent } from '../../infra/local/stack.ts';
import { agentIsLive, getAgent, listAgents } from '../../shared/db/agents.ts';
import { createDb, type Db } from '../../shared/db/client.ts';
import { getProject } from '../../shared/db/projects.ts';
import { tempDir } from '../helpers/env.ts';
import { startAgentsStack } from '../helpers/stack.ts';
import { SseReader } from '../helpers/sse.ts';

/** The staleness startAgentsStack sets (SVCD_AGENT_STALE_MS). */
const STALE_MS = 1_500;
const dir = tempDir('svc-multi-');
let stack: Stack;
let db: Db;
let token: string;

/** A project and what the tests need of it: its owning agent's index and an active key. */
interface Placed {
  id: string;
  owner: number;
  key: string;
}
let onFirst: Placed;
let onSecond: Placed;

async function call(method: string, path: string, body?: unknown, auth = token): Promise<Response> {
  return fetch(`${stack.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${auth}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

async function ok(method: string, path: string, body?: unknown): Promise<any> {
  const r = await call(method, path, body);
  expect(r.status, `${method} ${path}: ${r.status}`).toBeLessThan(300);
  // Checked against the service's OpenAPI document (test/helpers/openapi.ts).
  return checkedJson(stack.url, method, path, r);
}

async function createProject(name: string): Promise<{ id: string; agent: string }> {
  const p = await ok('POST', '/v0/projects', { name });
  return { id: p.id, agent: (await getProject(db, p.id))!.agent_id };
}

/** `POST /v2/sql` with a key, to the base URL or straight to one agent's listener. */
function sql(key: string, base = stack.url, extra: Record<string, string> = {}): Promise<Response> {
  return fetch(`${base}/v2/sql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json', ...extra },
    body: JSON.stringify({ sql: 'SELECT 41 + 1 AS answer' }),
  });
}

async function expectAnswer(r: Response): Promise<void> {
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toBe('application/vnd.svc.product-v1');
  expect(Buffer.from(await r.arrayBuffer()).toString('utf8')).toContain('42');
}

async function errorCode(r: Response): Promise<string> {
  return ((await r.json()) as { error: { code: string } }).error.code;
}

const agent = (i: number): StackAgent => stack.agents[i]!;
const other = (p: Placed) => agent(1 - p.owner);

beforeAll(async () => {
  stack = await startAgentsStack(dir.dir, 2);
  db = createDb(stack.settings);
  const su = await fetch(`${stack.url}/v0/signup`, { method: 'POST', body: '{}' });
  token = ((await su.json()) as { token: string }).token;
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  dir.cleanup();
});

describe('several agents in one table', () => {
  it('each agent has its own root, id and ports, and all are registered', async () => {
    expect(stack.agents).toHaveLength(2);
    expect(agent(0).root).toBe(join(dir.dir, 'agent'));
    expect(agent(1).root).toBe(join(dir.dir, 'agent-2'));
    expect(agent(0).id).not.toBe(agent(1).id);
    expect(new Set(stack.agents.flatMap((a) => [a.internalUrl, a.dataplaneUrl])).size).toBe(4);
    const registered = await listAgents(db);
    expect(registered.map((a) => a.agent_id).sort()).toEqual(stack.agents.map((a) => a.id).sort());
  });

  it('places new projects on the least-loaded live agent: they spread over both', async () => {
    const made = [];
    for (let i = 0; i < 4; i++) made.push(await createProject(`spread-${i}`));
    const counts = new Map<string, number>();
    for (const p of made) counts.set(p.agent, (counts.get(p.agent) ?? 0) + 1);
    expect([...counts.keys()].sort()).toEqual(stack.agents.map((a) => a.id).sort());
    expect([...counts.values()]).toEqual([2, 2]);
    const a = made.find((p) => p.agent === agent(0).id)!;
    const b = made.find((p) => p.agent === agent(1).id)!;
    onFirst = { id: a.id, owner: 0, key: '' };
    onSecond = { id: b.id, owner: 1, key: '' };
  });

  it('wakes a project on either agent, on that agent only, through the one base URL', async () => {
    for (const p of [onFirst, onSecond]) {
      expect((await ok('POST', `/v0/projects/${p.id}/wakeup`)).state).toBe('running');
      p.key = (await ok('POST', `/v0/projects/${p.id}/keys`, {})).key;
      expect(existsSync(join(agent(p.owner).root, 'tenants', p.id, 'data'))).toBe(true);
      expect(existsSync(join(other(p).root, 'tenants', p.id))).toBe(false);
    }
  });

  it('/v2 through the base URL works for projects on either agent', async () => {
    for (const p of [onFirst, onSecond]) {
      // The base URL is the first agent's: the other agent's projects are forwarded in one hop.
      for (let i = 0; i < 6; i++) await expectAnswer(await sql(p.key));
    }
  });

  it("a request for another agent's project is forwarded in one hop to its owner, which answers", async () => {
    for (const p of [onFirst, onSecond]) {
      // The non-owner has no engine for the project: without forwarding this would be 409.
      await expectAnswer(await sql(p.key, other(p).dataplaneUrl));
      await expectAnswer(await sql(p.key, agent(p.owner).dataplaneUrl));
      // Errors from before the hop are the receiving agent's own: a wrong secret never travels.
      const wrong = p.key.slice(0, -64) + '0'.repeat(64);
      const r = await sql(wrong, other(p).dataplaneUrl);
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
      // 403 for a foreign X-Svc-Project, decided before forwarding too.
      const denied = await sql(p.key, other(p).dataplaneUrl, { 'x-svc-project': p === onFirst ? onSecond.id : onFirst.id });
      expect(denied.status).toBe(403);
    }
  });

  it('never forwards a request that was already forwarded (no loops); the owner serves it', async () => {
    const p = onSecond;
    const looped = await sql(p.key, other(p).dataplaneUrl, { 'x-svc-forwarded-by': 'agt_0000000000000000' });
    expect(looped.status).toBe(503);
    expect(await errorCode(looped)).toBe('orchestrator_unavailable');
    await expectAnswer(await sql(p.key, agent(p.owner).dataplaneUrl, { 'x-svc-forwarded-by': agent(1 - p.owner).id }));
    // The owner authenticates a forwarded request itself.
    expect((await sql(p.key.slice(0, -64) + '0'.repeat(64), agent(p.owner).dataplaneUrl, { 'x-svc-forwarded-by': other(p).id })).status).toBe(401);
  });

  it('the base URL is the first agent, which forwards the second one\'s projects (so the forwarding path is exercised through it)', async () => {
    // Marked as already forwarded, a request is served by the owner and refused by the other
    // agent: through the base URL, the first agent's project is served, the second's refused.
    const statuses = [];
    for (const p of [onFirst, onSecond, onFirst, onSecond]) {
      const r = await sql(p.key, stack.url, { 'x-svc-forwarded-by': 'agt_0000000000000000' });
      statuses.push(r.status);
      await r.body?.cancel();
    }
    expect(statuses).toEqual([200, 503, 200, 503]);
  });

  it('once DELETE has answered 200, the very next /v2 request with the key is 401 on every agent', async () => {
    for (const p of [onFirst, onSecond]) {
      const k = await ok('POST', `/v0/projects/${p.id}/keys`, { label: 'revoked-everywhere' });
      // Warm the key on both agents: the owner's cache and the non-owner's (which forwards).
      for (const a of stack.agents) await expectAnswer(await sql(k.key, a.dataplaneUrl));
      const del = await call('DELETE', `/v0/projects/${p.id}/keys/${k.key_id}`);
      expect(del.status).toBe(200);
      for (const a of [other(p), agent(p.owner), other(p)]) {
        const r = await sql(k.key, a.dataplaneUrl);
        expect(r.status, `agent ${a.id}`).toBe(401);
        expect(await errorCode(r)).toBe('authentication_required');
      }
      for (let i = 0; i < 2; i++) expect((await sql(k.key)).status).toBe(401);
      // The project's other key is untouched.
      await expectAnswer(await sql(p.key));
    }
  });

  it('realtime publish and subscribe reach the owning agent for projects on either agent', async () => {
    for (const p of [onFirst, onSecond]) {
      const abort = new AbortController();
      const r = await fetch(`${stack.url}/v0/projects/${p.id}/realtime/subscribe?channel=multi`, {
        headers: { authorization: `Bearer ${token}` },
        signal: abort.signal,
      });
      expect(r.status).toBe(200);
      const sse = new SseReader(r);
      try {
        expect(await sse.next()).toEqual({ comment: 'subscribed' });
        const sent = await ok('POST', `/v0/projects/${p.id}/realtime/publish`, { channel: 'multi', event: 'hello', payload: { on: p.owner } });
        const frame = await sse.nextEvent(5000);
        expect(frame?.id).toBe(String(sent.id));
        expect(JSON.parse(frame!.data!)).toMatchObject({ event: 'hello', payload: { on: p.owner } });
      } finally {
        abort.abort();
        await sse.close();
      }
    }
  });

  it("object bytes (fs backend) are kept by the project's own agent", async () => {
    for (const p of [onFirst, onSecond]) {
      expect((await call('PUT', `/v0/projects/${p.id}/storage/buckets/files`)).status).toBe(201);
      const put = await fetch(`${stack.url}/v0/projects/${p.id}/storage/objects/files/hello.txt`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' },
        body: `bytes of ${p.id}`,
      });
      expect(put.status).toBe(201);
      const get = await call('GET', `/v0/projects/${p.id}/storage/objects/files/hello.txt`);
      expect(await get.text()).toBe(`bytes of ${p.id}`);
      expect(existsSync(join(agent(p.owner).root, 'blobs', p.id))).toBe(true);
      expect(existsSync(join(other(p).root, 'blobs', p.id))).toBe(false);
    }
  });
});

describe('an agent that dies', () => {
  it("makes its projects answer 503 orchestrator_unavailable; the other agent's are unaffected", async () => {
    const dead = agent(onSecond.owner);
    dead.process.kill('SIGKILL');
    await new Promise((r) => dead.process.once('exit', r));

    // At once, before it is stale: the live agent's projects keep working through the base URL
    // (the front skips the listener that refuses connections), the dead one's answer 503.
    for (let i = 0; i < 4; i++) await expectAnswer(await sql(onFirst.key));
    const early = await sql(onSecond.key);
    expect(early.status).toBe(503);
    expect(await errorCode(early)).toBe('orchestrator_unavailable');

    // After SVCD_AGENT_STALE_MS without a heartbeat, it is stale in the registry...
    const deadline = Date.now() + STALE_MS + 5_000;
    for (;;) {
      const record = (await getAgent(db, dead.id))!;
      if (!agentIsLive(record, STALE_MS) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    // ...and every call for its projects answers 503 orchestrator_unavailable: lifecycle calls...
    for (const [method, path] of [
      ['GET', `/v0/projects/${onSecond.id}`],
      ['POST', `/v0/projects/${onSecond.id}/wakeup`],
      ['POST', `/v0/projects/${onSecond.id}/sleep`],
      ['GET', `/v0/projects/${onSecond.id}/head`],
    ] as const) {
      const r = await call(method, path);
      expect(r.status, `${method} ${path}`).toBe(503);
      const body = (await checkedJson(stack.url, method, path, r)) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('orchestrator_unavailable');
      expect(body.error.message).toMatch(/not answering/);
    }
    // ...and /v2 for its project, through the base URL and straight to the live agent: 503, never moved.
    for (const base of [stack.url, other(onSecond).dataplaneUrl]) {
      const r = await sql(onSecond.key, base);
      expect(r.status).toBe(503);
      const body = (await r.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('orchestrator_unavailable');
      expect(body.error.message).toMatch(/not answering/);
    }
    // Revocation cannot be confirmed: 503, not 200.
    const k = await ok('POST', `/v0/projects/${onSecond.id}/keys`, {});
    expect((await call('DELETE', `/v0/projects/${onSecond.id}/keys/${k.key_id}`)).status).toBe(503);

    // The live agent's project: lifecycle, /v2, realtime all work.
    expect((await ok('GET', `/v0/projects/${onFirst.id}`)).state).toBe('running');
    expect((await ok('POST', `/v0/projects/${onFirst.id}/wakeup`)).state).toBe('running');
    for (let i = 0; i < 4; i++) await expectAnswer(await sql(onFirst.key));
    expect((await call('POST', `/v0/projects/${onFirst.id}/realtime/publish`, { channel: 'c', event: 'e', payload: {} })).status).toBe(200);
  });

  it('new projects go only to the live agent', async () => {
    for (let i = 0; i < 3; i++) {
      const p = await createProject(`after-${i}`);
      expect(p.agent).toBe(agent(onFirst.owner).id);
    }
  });

  it('comes back with the same id and serves its projects again when restarted (they were never moved)', async () => {
    const back = await stack.restartAgent(onSecond.owner);
    expect(back.id).toBe(agent(onSecond.owner).id);
    // The engine it left running is adopted.
    expect((await ok('GET', `/v0/projects/${onSecond.id}`)).state).toBe('running');
    for (let i = 0; i < 4; i++) await expectAnswer(await sql(onSecond.key));
  });
});
