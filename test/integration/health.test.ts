/**
 * `GET /v0/health` reports whether any host agent can run tenants, judged as placement judges it:
 * the handlers app over a real DynamoDB Local table, with agent records registered as a real
 * agent registers them (fresh, stale, or failing its engine pin).
 */
import { describe, expect, it } from 'vitest';
import { buildDeps } from '../../handlers/deps.ts';
import { createApp } from '../../handlers/index.ts';
import { registerAgent } from '../../shared/db/agents.ts';
import { testDeployment } from '../helpers/env.ts';

const STALE_MS = 2_000;

async function deployment() {
  const { env, db } = await testDeployment({ SVCD_AGENT_STALE_MS: String(STALE_MS) });
  const app = createApp(buildDeps(env, () => {}));
  const health = async () => {
    const r = await app.fetch(new Request('http://svc.test/v0/health'));
    return { status: r.status, text: await r.clone().text(), body: (await r.json()) as any, headers: r.headers };
  };
  const register = (id: string, heartbeatAgoMs: number, pinOk = true) => {
    const at = new Date(Date.now() - heartbeatAgoMs).toISOString();
    return registerAgent(db, {
      agent_id: id,
      internal_url: `http://10.0.0.9:8788/${id}`,
      dataplane_url: `http://10.0.0.9:8789/${id}`,
      capacity: 10,
      pin_ok: pinOk,
      engine_version: '3.0.0',
      started_at: at,
      heartbeat_at: at,
    });
  };
  return { health, register };
}

describe('GET /v0/health', () => {
  it('is 503 degraded, in the error envelope, while no agent is registered', async () => {
    const { health } = await deployment();
    const r = await health();
    expect(r.status).toBe(503);
    expect(r.body).toMatchObject({
      error: { code: 'orchestrator_unavailable', message: expect.stringMatching(/^no live host agent/) },
      status: 'degraded',
      agents: { live: 0, total: 0 },
    });
    expect(Date.parse(r.body.time)).not.toBeNaN();
    expect(r.headers.get('x-request-id')).toMatch(/^req_/);
  });

  it('is 503 when every registered agent is stale or cannot run engines, and never shows their addresses', async () => {
    const { health, register } = await deployment();
    await register('agt_00000000000000a1', STALE_MS + 5_000);
    await register('agt_00000000000000a2', 0, false);
    const r = await health();
    expect(r.status).toBe(503);
    expect(r.body).toMatchObject({ error: { code: 'orchestrator_unavailable' }, status: 'degraded', agents: { live: 0, total: 2 } });
    expect(r.text).not.toContain('10.0.0.9');
    expect(r.text).not.toContain('agt_');
  });

  it('is 200 ok with the figures when one agent is live, and turns degraded once it goes stale', async () => {
    const { health, register } = await deployment();
    await register('agt_00000000000000b1', STALE_MS + 5_000);
    await register('agt_00000000000000b2', 0);
    const ok = await health();
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ status: 'ok', time: expect.any(String), agents: { live: 1, total: 2 } });
    expect(ok.text).not.toContain('10.0.0.9');

    // The live agent stops heartbeating (as one killed with SIGKILL does): degraded within the window.
    await new Promise((r) => setTimeout(r, STALE_MS + 200));
    const later = await health();
    expect(later.status).toBe(503);
    expect(later.body.agents).toEqual({ live: 0, total: 2 });
  });
});
