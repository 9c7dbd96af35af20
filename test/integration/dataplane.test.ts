/**
 * The `/v2` data plane through a real host agent and the real engine (contract "DELETE /v2/{path}",
 * "Authentication" 2–4, "Versioning" 2; docs/dataplane.md): the whole authentication
 * matrix, X-Svc-Project, tenant_not_running, the engine's answer unchanged, revocation with a warm
 * cache, no DynamoDB read on warm requests, an engine gone mid-request.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getAgent } from '../../shared/db/agents.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { decodeEnvelope } from '../helpers/envelope.ts';

const PROTOCOL = { 'x-svc-protocol-minor': '3' };
const CHALLENGE = 'Bearer realm="svc-cloud"';
const REQUEST_ID = /^req_[0-9a-f]{16}$/;

let svc: TestService;
let token: string;
let pool: Pool;
/** DynamoDB requests the agent's client has sent. */
let dynamoCalls = 0;

interface Tenant {
  id: string;
  key: string;
  keyId: string;
}

async function project(name: string, wake: boolean): Promise<Tenant> {
  const r = await svc.request('POST', '/v0/projects', { token, body: { name } });
  const id = ((await r.json()) as { id: string }).id;
  const k = (await (await svc.request('POST', `/v0/projects/${id}/keys`, { token, body: {} })).json()) as { key: string; key_id: string };
  if (wake) {
    const w = await svc.request('POST', `/v0/projects/${id}/wakeup`, { token });
    expect(w.status).toBe(200);
  }
  return { id, key: k.key, keyId: k.key_id };
}

/** One /v2 request; `headers` as undici's flat array so a header can be repeated. */
async function v2(method: string, path: string, headers: string[] | Record<string, string>, body?: string) {
  const r = await pool.request({ method, path, headers, body });
  const bytes = Buffer.from(await r.body.arrayBuffer());
  return { status: r.statusCode, headers: r.headers, bytes, json: () => JSON.parse(bytes.toString('utf8')) };
}

const sql = (statement: string) => JSON.stringify({ sql: statement });
const bearer = (t: string) => ({ authorization: `Bearer ${t}`, ...PROTOCOL, 'content-type': 'application/json' });

let a: Tenant;
let b: Tenant;
let asleep: Tenant;

beforeAll(async () => {
  // No heartbeat during the file, so the agent's DynamoDB calls are the data plane's alone.
  svc = await startTestService({ SVCD_HEARTBEAT_MS: '600000', SVCD_AGENT_STALE_MS: '3600000' });
  svc.agent.ctx.db.doc.middlewareStack.add(
    (next) => async (args) => {
      dynamoCalls++;
      return next(args);
    },
    { step: 'initialize', name: 'countDynamoCalls' },
  );
  token = (await signup(svc)).token;
  pool = new Pool(svc.agent.dataplaneUrl, { connections: 16 });
  [a, b, asleep] = await Promise.all([project('a', true), project('b', true), project('asleep', false)]);
  const create = await v2('POST', '/v2/sql', bearer(a.key), sql('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)'));
  expect(create.status).toBe(200);
  await v2('POST', '/v2/sql', bearer(a.key), JSON.stringify({ sql: 'INSERT INTO t VALUES (1, ?)', params: ['from a'] }));
}, 120_000);
afterAll(async () => {
  await pool?.close();
  await svc?.stop();
});

describe('the listener', () => {
  it('is registered with its real URL (SVCD_DATAPLANE_PORT=0 picks a port)', async () => {
    const agent = await getAgent(svc.db, svc.agent.ctx.agentId);
    expect(agent!.dataplane_url).toBe(svc.agent.dataplaneUrl);
    expect(agent!.dataplane_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(agent!.dataplane_url).not.toMatch(/:0$/);
    const r = await fetch(`${agent!.dataplane_url}/v2/capabilities`);
    expect(r.status).toBe(401);
  });

  it('answers 404 not_found outside /v2', async () => {
    const r = await v2('GET', '/v0/projects', bearer(a.key));
    expect(r.status).toBe(404);
    expect(r.json().error.code).toBe('not_found');
  });
});

describe('authentication matrix: every case is 401 with the challenge, the envelope and a request id', () => {
  async function expect401(headers: string[] | Record<string, string>) {
    const r = await v2('GET', '/v2/capabilities', headers);
    expect(r.status).toBe(401);
    expect(r.headers['www-authenticate']).toBe(CHALLENGE);
    expect(r.headers['x-request-id']).toMatch(REQUEST_ID);
    expect(r.headers['content-type']).toMatch(/^application\/json/);
    const e = r.json().error;
    expect(e.code).toBe('authentication_required');
    // Never an echo of what was presented.
    expect(e.message).not.toContain(a.key);
    expect(e.message).not.toContain(a.key.slice(38));
    return e.message as string;
  }

  it('missing Authorization', async () => {
    await expect401({ ...PROTOCOL });
  });

  it('malformed Authorization', async () => {
    for (const value of ['Basic Zm9vOmJhcg==', 'Bearer', 'Bearer ', `Bearer  ${a.key}`, `Bearer ${a.key} x`, `Bearer ${a.key},x`, a.key, `Token ${a.key}`]) {
      await expect401({ authorization: value, ...PROTOCOL });
    }
  });

  it('a malformed project key (wrong prefix, length, case)', async () => {
    const [, id, secret] = /^svc1_([0-9a-f]{32})_([0-9a-f]{64})$/.exec(a.key)!;
    for (const t of [`svc2_${id}_${secret}`, `svc1_${id}_${secret!.slice(1)}`, `svc1_${id!.toUpperCase()}_${secret}`, `svc1_${id}${secret}`]) {
      await expect401({ authorization: `Bearer ${t}`, ...PROTOCOL });
    }
  });

  it('a duplicated Authorization header, even twice the same valid key', async () => {
    await expect401(['authorization', `Bearer ${a.key}`, 'authorization', `Bearer ${a.key}`, 'x-svc-protocol-minor', '3']);
    await expect401(['authorization', `Bearer ${a.key}`, 'authorization', `Bearer ${b.key}`, 'x-svc-protocol-minor', '3']);
  });

  it('an unknown key_id', async () => {
    await expect401(bearer(`svc1_${'a'.repeat(32)}_${'b'.repeat(64)}`));
  });

  it('the right key_id with a wrong secret', async () => {
    const wrong = a.key.slice(0, -4) + (a.key.endsWith('0000') ? '1111' : '0000');
    await expect401(bearer(wrong));
  });

  it('a session token (the data plane takes project keys only)', async () => {
    const message = await expect401(bearer(token));
    expect(message).toMatch(/project key/);
  });

  it('a revoked key', async () => {
    const t = await project('revoked', false);
    await svc.request('DELETE', `/v0/projects/${t.id}/keys/${t.keyId}`, { token });
    await expect401(bearer(t.key));
  });
});

describe('X-Svc-Project', () => {
  it('is optional: the key alone selects its project', async () => {
    const r = await v2('POST', '/v2/sql', bearer(a.key), sql('SELECT v FROM t WHERE id = 1'));
    expect(r.status).toBe(200);
    expect(JSON.stringify(decodeEnvelope(r.bytes))).toContain('from a');
  });

  it('accepts the project id and the bare 16 hex', async () => {
    for (const ref of [a.id, a.id.slice(4)]) {
      const r = await v2('GET', '/v2/capabilities', { ...bearer(a.key), 'x-svc-project': ref });
      expect(r.status).toBe(200);
    }
  });

  it("another project's key: 403 authorization_denied with X-Svc-Project naming this project", async () => {
    for (const ref of [a.id, a.id.slice(4)]) {
      const r = await v2('POST', '/v2/sql', { ...bearer(b.key), 'x-svc-project': ref }, sql('SELECT v FROM t'));
      expect(r.status).toBe(403);
      expect(r.headers['x-request-id']).toMatch(REQUEST_ID);
      expect(r.json().error.code).toBe('authorization_denied');
    }
  });

  it("another project's key without X-Svc-Project reaches its own project, never this one", async () => {
    const r = await v2('POST', '/v2/sql', bearer(b.key), sql('SELECT v FROM t'));
    // Project b has no table t: the engine's own error, from b's database.
    expect(r.headers['content-type']).toBe('application/vnd.svc.product-v1');
    expect(r.bytes.toString('utf8')).not.toContain('from a');
    expect(r.status).toBeGreaterThanOrEqual(400);
  });

  it('a malformed or repeated X-Svc-Project is 403', async () => {
    for (const ref of [a.id.toUpperCase(), `prj_${a.id}`, 'prj_', '', 'x'.repeat(16)]) {
      const r = await v2('GET', '/v2/capabilities', { ...bearer(a.key), 'x-svc-project': ref });
      expect(r.status).toBe(403);
    }
    const twice = await v2('GET', '/v2/capabilities', ['authorization', `Bearer ${a.key}`, 'x-svc-project', a.id, 'x-svc-project', b.id, ...Object.entries(PROTOCOL).flat()]);
    expect(twice.status).toBe(403);
  });
});

describe('tenant_not_running', () => {
  it('is 409 for a project never woken, and the request does not wake it', async () => {
    const r = await v2('POST', '/v2/sql', bearer(asleep.key), sql('SELECT 1'));
    expect(r.status).toBe(409);
    expect(r.headers['x-request-id']).toMatch(REQUEST_ID);
    expect(r.json().error.code).toBe('tenant_not_running');
    const p = (await (await svc.request('GET', `/v0/projects/${asleep.id}`, { token })).json()) as { state: string };
    expect(p.state).toBe('stopped');
    expect(svc.agent.ctx.tenants.liveEndpoint(asleep.id)).toBeNull();
  });

  it('is 409 after sleep', async () => {
    const t = await project('sleepy', true);
    expect((await v2('GET', '/v2/capabilities', bearer(t.key))).status).toBe(200);
    expect((await svc.request('POST', `/v0/projects/${t.id}/sleep`, { token })).status).toBe(200);
    const r = await v2('GET', '/v2/capabilities', bearer(t.key));
    expect(r.status).toBe(409);
    expect(r.json().error.code).toBe('tenant_not_running');
  });
});

describe("the engine's answer is returned unchanged", () => {
  const VOLATILE = new Set(['date', 'x-svc-request-id', 'x-request-id', 'connection', 'keep-alive']);
  const stable = (h: Record<string, unknown>) => Object.fromEntries(Object.entries(h).filter(([k]) => !VOLATILE.has(k)));

  async function direct(method: string, path: string, headers: Record<string, string>, body?: string) {
    const ep = svc.agent.ctx.tenants.liveEndpoint(a.id)!;
    const r = await fetch(`http://${ep.host}:${ep.port}${path}`, { method, headers, body });
    return { status: r.status, headers: Object.fromEntries(r.headers), bytes: Buffer.from(await r.arrayBuffer()) };
  }

  it('status, headers less hop-by-hop ones, and body bytes match a direct request', async () => {
    const body = sql('SELECT id, v FROM t ORDER BY id');
    const via = await v2('POST', '/v2/sql', bearer(a.key), body);
    const raw = await direct('POST', '/v2/sql', { ...PROTOCOL, 'content-type': 'application/json' }, body);
    expect(via.status).toBe(raw.status);
    expect(stable(via.headers)).toEqual(stable(raw.headers));
    expect(via.bytes.equals(raw.bytes)).toBe(true);
    expect(via.headers['x-svc-request-id']).toMatch(REQUEST_ID);
    expect(via.headers['x-svc-protocol-minor']).toBe('3');
    expect(via.headers['x-request-id']).toMatch(REQUEST_ID);
  });

  it("without X-Svc-Protocol-Minor: the engine's own 400, unchanged", async () => {
    const via = await v2('GET', '/v2/capabilities', { authorization: `Bearer ${a.key}` });
    const raw = await direct('GET', '/v2/capabilities', {});
    expect(via.status).toBe(400);
    expect(raw.status).toBe(400);
    expect(via.headers['content-type']).toBe('application/vnd.svc.product-v1');
    expect(stable(via.headers)).toEqual(stable(raw.headers));
    expect(decodeEnvelope(via.bytes)).toEqual(decodeEnvelope(raw.bytes));
  });

  it('every method reaches the engine: GET, POST, DELETE, and its enveloped 404', async () => {
    await v2('POST', '/v2/sql', bearer(a.key), sql('CREATE TABLE scratch (x)'));
    const del = await v2('DELETE', '/v2/tables/scratch', bearer(a.key));
    expect(del.status).toBe(200);
    expect(del.headers['content-type']).toBe('application/vnd.svc.product-v1');
    const missing = await v2('PATCH', '/v2/nothing-here', bearer(a.key));
    expect(missing.status).toBe(404);
    expect(missing.headers['content-type']).toBe('application/vnd.svc.product-v1');
  });
});

describe('key cache and revocation', () => {
  it('reads nothing from DynamoDB for warm requests', async () => {
    await v2('GET', '/v2/capabilities', bearer(a.key));
    const before = dynamoCalls;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < 50; i++) expect((await v2('POST', '/v2/sql', bearer(a.key), sql('SELECT v FROM t WHERE id = 1'))).status).toBe(200);
      }),
    );
    expect(dynamoCalls - before).toBe(0);
  });

  it('reads a cold key once, however many requests arrive together', async () => {
    const t = await project('cold', false);
    const loads = svc.agent.ctx.keyCache.stats.loads;
    const before = dynamoCalls;
    const answers = await Promise.all(Array.from({ length: 16 }, () => v2('GET', '/v2/capabilities', bearer(t.key))));
    expect(answers.map((r) => r.status)).toEqual(Array(16).fill(409));
    // The key's lookup item, plus its project's placement (the owning agent), read once per project.
    expect(dynamoCalls - before).toBe(2);
    expect(svc.agent.ctx.keyCache.stats.loads - loads).toBe(1);
    const second = (await (await svc.request('POST', `/v0/projects/${t.id}/keys`, { token, body: {} })).json()) as { key: string };
    const again = dynamoCalls;
    expect((await v2('GET', '/v2/capabilities', bearer(second.key))).status).toBe(409);
    expect(dynamoCalls - again).toBe(1);
  });

  it('refuses the very next request after DELETE answered 200, with the cache warm and no DynamoDB read', async () => {
    const t = await project('revoke-warm', true);
    expect((await v2('GET', '/v2/capabilities', bearer(t.key))).status).toBe(200);
    expect((await v2('GET', '/v2/capabilities', bearer(t.key))).status).toBe(200);
    const del = await svc.request('DELETE', `/v0/projects/${t.id}/keys/${t.keyId}`, { token });
    expect(del.status).toBe(200);
    const before = dynamoCalls;
    const next = await v2('GET', '/v2/capabilities', bearer(t.key));
    expect(next.status).toBe(401);
    expect(next.headers['www-authenticate']).toBe(CHALLENGE);
    expect(dynamoCalls - before).toBe(0);
    // Other keys of the project keep working.
    const other = (await (await svc.request('POST', `/v0/projects/${t.id}/keys`, { token, body: {} })).json()) as { key: string };
    expect((await v2('GET', '/v2/capabilities', bearer(other.key))).status).toBe(200);
  });

  it('holds under load: no request issued after DELETE answered passes', async () => {
    const t = await project('revoke-load', true);
    let revokedAt = Infinity;
    let stop = false;
    const late: number[] = [];
    const workers = Array.from({ length: 8 }, async () => {
      while (!stop) {
        const sentAt = performance.now();
        const r = await v2('GET', '/v2/capabilities', bearer(t.key));
        if (r.status === 200 && sentAt > revokedAt) late.push(sentAt - revokedAt);
      }
    });
    await new Promise((r) => setTimeout(r, 100));
    const del = await svc.request('DELETE', `/v0/projects/${t.id}/keys/${t.keyId}`, { token });
    revokedAt = performance.now();
    expect(del.status).toBe(200);
    await new Promise((r) => setTimeout(r, 100));
    stop = true;
    await Promise.all(workers);
    expect(late).toEqual([]);
  });
});

describe('an engine gone mid-request', () => {
  it('answers 502 upstream_unavailable, then 409 tenant_not_running', async () => {
    const t = await project('crash', true);
    expect((await v2('GET', '/v2/capabilities', bearer(t.key))).status).toBe(200);
    const { pid } = JSON.parse(readFileSync(join(svc.agent.ctx.root, 'run', `${t.id}.json`), 'utf8')) as { pid: number };
    // A query that keeps the engine busy for seconds.
    const slow = v2('POST', '/v2/sql', bearer(t.key), sql('WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000000) SELECT count(*) FROM c'));
    await new Promise((r) => setTimeout(r, 300));
    process.kill(pid, 'SIGKILL');
    const r = await slow;
    expect(r.status).toBe(502);
    expect(r.headers['x-request-id']).toMatch(REQUEST_ID);
    expect(r.json().error.code).toBe('upstream_unavailable');
    for (let i = 0; i < 100 && svc.agent.ctx.tenants.liveEndpoint(t.id); i++) await new Promise((res) => setTimeout(res, 20));
    const after = await v2('GET', '/v2/capabilities', bearer(t.key));
    expect(after.status).toBe(409);
    expect(after.json().error.code).toBe('tenant_not_running');
  });
});
