import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueSessionToken } from '../../shared/auth.ts';
import { getProject } from '../../shared/db/projects.ts';
import { projectSchema } from '../../shared/schemas/projects.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

let svc: TestService;
let token: string;
beforeAll(async () => {
  svc = await startTestService();
  token = (await signup(svc)).token;
});
afterAll(() => svc?.stop());

const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

async function create(name = 'demo', t = token): Promise<Record<string, any>> {
  const r = await svc.request('POST', '/v0/projects', { token: t, body: { name } });
  expect(r.status).toBe(201);
  return (await r.json()) as Record<string, any>;
}

describe('POST /v0/projects', () => {
  it('creates a stopped project with every contract field', async () => {
    const p = await create('my app');
    expect(Object.keys(p).sort()).toEqual(Object.keys(projectSchema.shape).sort());
    expect(p.id).toMatch(/^prj_[0-9a-f]{16}$/);
    expect(p.name).toBe('my app');
    expect(p.state).toBe('stopped');
    expect(p.created_at).toMatch(RFC3339_UTC);
    expect(p.updated_at).toMatch(RFC3339_UTC);
    expect(p.native).toEqual({ pin: '3.0.0', data_plane: '/v2' });
  });

  it('records the placement on the registered agent', async () => {
    const p = await create();
    const stored = await getProject(svc.db, p.id);
    expect(stored?.agent_id).toBe(svc.agent.ctx.agentId);
    expect(stored?.owner).toMatch(/^acct_/);
  });

  it('refuses a bad name with 400 naming the field', async () => {
    for (const body of [{}, { name: '' }, { name: 'x'.repeat(65) }, { name: 'a\u0000b' }, { name: null }]) {
      const r = await svc.request('POST', '/v0/projects', { token, body });
      expect(r.status).toBe(400);
      const e = ((await r.json()) as any).error;
      expect(e.code).toBe('invalid_request');
      expect(e.message).toMatch(/^name: /);
    }
  });

  it('requires a session', async () => {
    const r = await svc.request('POST', '/v0/projects', { body: { name: 'x' } });
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
  });
});

describe('GET /v0/projects/{id}', () => {
  it('answers the project to its owner', async () => {
    const p = await create();
    const r = await svc.request('GET', `/v0/projects/${p.id}`, { token });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual(p);
  });

  it('answers 404 to another account, exactly as for a project that does not exist', async () => {
    const p = await create();
    const other = (await signup(svc)).token;
    const r1 = await svc.request('GET', `/v0/projects/${p.id}`, { token: other });
    const r2 = await svc.request('GET', '/v0/projects/prj_ffffffffffffffff', { token: other });
    expect(r1.status).toBe(404);
    expect(r2.status).toBe(404);
    expect(((await r1.json()) as any).error.code).toBe('not_found');
    expect(((await r2.json()) as any).error.code).toBe('not_found');
  });

  it('answers 400 for a malformed id', async () => {
    const r = await svc.request('GET', '/v0/projects/prj_XYZ', { token });
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error.message).toMatch(/^id: /);
  });

  it.each([
    ['missing', {}],
    ['malformed', { authorization: 'Token abc' }],
    ['duplicated', { authorization: `Bearer a, Bearer b` }],
    ['unknown', { authorization: 'Bearer not-a-jwt' }],
  ])('answers 401 for a %s credential', async (_n, headers) => {
    const r = await svc.request('GET', '/v0/projects/prj_ffffffffffffffff', { headers });
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
    expect(((await r.json()) as any).error.code).toBe('authentication_required');
  });

  it('answers 401 for an expired session', async () => {
    const a = await signup(svc);
    const { token: expired } = await issueSessionToken(svc.env.SVCD_SESSION_SECRET!, a.accountId, 60, Date.now() - 7200_000);
    const r = await svc.request('GET', '/v0/projects', { token: expired });
    expect(r.status).toBe(401);
  });

  it('answers 401 to a project key on /v0 routes', async () => {
    const r = await svc.request('GET', '/v0/projects', { token: `svc1_${'a'.repeat(32)}_${'b'.repeat(64)}` });
    expect(r.status).toBe(401);
  });
});

describe('GET /v0/projects', () => {
  it('lists only the caller\'s projects, paginated', async () => {
    const t = (await signup(svc)).token;
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push((await create(`p${i}`, t)).id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const q: string = cursor ? `?limit=2&cursor=${encodeURIComponent(cursor)}` : '?limit=2';
      const r = await svc.request('GET', `/v0/projects${q}`, { token: t });
      expect(r.status).toBe(200);
      const b = (await r.json()) as { projects: { id: string }[]; next_cursor: string | null };
      expect(b.projects.length).toBeLessThanOrEqual(2);
      seen.push(...b.projects.map((p) => p.id));
      cursor = b.next_cursor;
    } while (cursor);
    expect(seen.sort()).toEqual(ids.sort());
  });

  it('refuses a forged cursor with 400', async () => {
    const forged = btoa(JSON.stringify({ gsi1pk: 'ACCT#acct_0000000000000000', gsi1sk: 'x', pk: 'x', sk: 'y' }));
    const r = await svc.request('GET', `/v0/projects?cursor=${encodeURIComponent(forged)}`, { token });
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error.message).toMatch(/cursor/);
  });
});

describe('routing', () => {
  it('answers 404 not_found for unknown routes and wrong methods', async () => {
    for (const [method, path] of [['GET', '/v0/nothing'], ['DELETE', '/v0/projects'], ['PATCH', '/v0/health'], ['GET', '/']]) {
      const r = await svc.request(method!, path!, { token });
      expect(r.status).toBe(404);
      expect(r.headers.get('x-request-id')).toMatch(/^req_/);
      expect(((await r.json()) as any).error.code).toBe('not_found');
    }
  });

  it('answers GET /v0/health without authentication', async () => {
    const r = await svc.request('GET', '/v0/health');
    expect(r.status).toBe(200);
    expect(((await r.json()) as any).status).toBe('ok');
  });
});
