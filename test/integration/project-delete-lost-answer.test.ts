/**
 * A project DELETE whose internal call loses its way (docs/lifecycle.md "Deleting a project"): 503
 * `orchestrator_unavailable` means nothing was deleted. The handlers reach the real agent through an
 * agent client whose connection fails on chosen calls — after the agent has answered (the answer
 * lost on its way back), or before the request left — and the DELETE's answer must say what
 * happened: 200 when the project is gone, 503 only when it is whole. Real DynamoDB Local and agent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDeps } from '../../handlers/deps.ts';
import { createApp, type App } from '../../handlers/index.ts';
import { createAgentClient } from '../../shared/agent-client.ts';
import { getProjectDeletion } from '../../shared/db/project-delete.ts';
import { getProject } from '../../shared/db/projects.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

/** What the next internal delete calls meet, one entry per call: the answer lost, no connection at all, or through. */
type Fate = 'answer-lost' | 'refused' | 'through';

let svc: TestService;
let app: App;
let token: string;
const fates: Fate[] = [];

/** A connection failure as Node's fetch reports it. */
function connectionFailure(code: string): TypeError {
  return Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error(code), { code }) });
}

const lossyFetch: typeof fetch = async (input, init) => {
  const url = String(input instanceof Request ? input.url : input);
  const fate: Fate = url.endsWith('/delete') ? (fates.shift() ?? 'through') : 'through';
  if (fate === 'refused') throw connectionFailure('ECONNREFUSED');
  const response = await fetch(input, init);
  if (fate === 'through') return response;
  // The agent did the work and answered; the connection fails before the answer arrives.
  await response.arrayBuffer();
  throw connectionFailure('ECONNRESET');
};

beforeAll(async () => {
  svc = await startTestService();
  const deps = buildDeps(svc.env, () => {});
  app = createApp({ ...deps, agents: createAgentClient(deps.settings.SVCD_INTERNAL_SECRET, lossyFetch) });
  token = (await signup(svc)).token;
}, 60_000);
afterAll(() => svc?.stop());

async function request(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const r = await app.fetch(
    new Request(`http://svc.test${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );
  return { status: r.status, body: await r.json() };
}

async function project(): Promise<any> {
  const r = await request('POST', '/v0/projects', { name: 'lost' });
  expect(r.status).toBe(201);
  return r.body;
}

describe('a project DELETE whose internal call fails', () => {
  it('answers 200 when the agent deleted the project and its answer was lost', async () => {
    const p = await project();
    fates.push('answer-lost');
    const r = await request('DELETE', `/v0/projects/${p.id}`);
    expect(await getProject(svc.db, p.id)).toBeNull();
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ id: p.id, name: 'lost', state: 'stopped', created_at: p.created_at });
    const deletion = (await getProjectDeletion(svc.db, p.id))!;
    expect(r.body.updated_at).toBe(deletion.deleted_at);
    expect((await request('GET', `/v0/projects/${p.id}`)).status).toBe(404);
  });

  it('answers 200 when every call to the agent lost its answer (the deletion committed)', async () => {
    const p = await project();
    fates.push('answer-lost', 'answer-lost');
    const r = await request('DELETE', `/v0/projects/${p.id}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ id: p.id, state: 'stopped' });
    expect(await getProject(svc.db, p.id)).toBeNull();
  });

  it('answers 200 when the first call never reached the agent and the second did', async () => {
    const p = await project();
    fates.push('refused');
    const r = await request('DELETE', `/v0/projects/${p.id}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(await getProject(svc.db, p.id)).toBeNull();
  });

  it('answers 503 only when nothing was deleted', async () => {
    const p = await project();
    fates.push('refused', 'refused');
    const r = await request('DELETE', `/v0/projects/${p.id}`);
    expect([r.status, r.body.error.code]).toEqual([503, 'orchestrator_unavailable']);
    expect(await getProject(svc.db, p.id)).not.toBeNull();
    expect(await getProjectDeletion(svc.db, p.id)).toBeNull();
    expect((await request('GET', `/v0/projects/${p.id}`)).status).toBe(200);
    expect((await request('DELETE', `/v0/projects/${p.id}`)).status).toBe(200);
  });
});
