import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignJWT } from 'jose';
import { issueInternalToken } from '../../shared/auth.ts';
import { getAgent, listAgents } from '../../shared/db/agents.ts';
import { REPO, tempDir, testEnv } from '../helpers/env.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { fakeEngine } from '../helpers/lifecycle.ts';

describe('host agent internal API', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService();
  });
  afterAll(() => svc?.stop());

  it('registers itself with its URLs and a heartbeat', async () => {
    const a = await getAgent(svc.db, svc.agent.ctx.agentId);
    expect(a).not.toBeNull();
    expect(a!.internal_url).toBe(svc.agent.internalUrl);
    expect(a!.pin_ok).toBe(true);
    expect(a!.engine_version).toBe('3.0.0');
    expect(Date.now() - Date.parse(a!.heartbeat_at)).toBeLessThan(60_000);
  });

  it('refuses requests without a valid internal token before any work', async () => {
    const url = `${svc.agent.internalUrl}/internal/v1/health`;
    const none = await fetch(url);
    expect(none.status).toBe(401);
    const wrong = await fetch(url, { headers: { authorization: `Bearer ${await issueInternalToken('z'.repeat(64))}` } });
    expect(wrong.status).toBe(401);
    // A token living longer than 60 s is refused even with the right secret.
    const long = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setAudience('host-agent')
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(new TextEncoder().encode(svc.env.SVCD_INTERNAL_SECRET));
    expect((await fetch(url, { headers: { authorization: `Bearer ${long}` } })).status).toBe(401);
    const ok = await fetch(url, { headers: { authorization: `Bearer ${await issueInternalToken(svc.env.SVCD_INTERNAL_SECRET!)}` } });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as any).agent_id).toBe(svc.agent.ctx.agentId);
  });
});

describe('an agent whose engine fails the pin check', () => {
  let svc: TestService;
  let dir: ReturnType<typeof tempDir>;
  beforeAll(async () => {
    dir = tempDir();
    const fake = fakeEngine(dir.dir, 'old-engine', { version: '2.9.0', protocolMinor: 2 });
    svc = await startTestService({ SVCD_ENGINE_BIN: fake });
  });
  afterAll(async () => {
    await svc?.stop();
    dir?.cleanup();
  });

  it('registers as unable to run tenants, and project creation answers 503 writing nothing', async () => {
    const agents = await listAgents(svc.db);
    expect(agents.map((a) => a.pin_ok)).toEqual([false]);
    const { token } = await signup(svc);
    const r = await svc.request('POST', '/v0/projects', { token, body: { name: 'x' } });
    expect(r.status).toBe(503);
    expect(((await r.json()) as any).error.code).toBe('orchestrator_unavailable');
    const list = await svc.request('GET', '/v0/projects', { token });
    expect(((await list.json()) as any).projects).toEqual([]);
  });
});

describe('svc-agent executable', () => {
  it('fails at start with one line naming a bad setting', async () => {
    const env = { PATH: process.env.PATH!, ...testEnv({ SVCD_HEARTBEAT_MS: 'often' }) };
    const child = spawn(join(REPO, 'bin/svc-agent'), [], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    expect(code).toBe(2);
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err).toMatch(/SVCD_HEARTBEAT_MS/);
  });
});
