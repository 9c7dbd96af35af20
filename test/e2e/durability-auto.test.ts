/**
 * Agent loss declared by the live agents themselves (docs/durability.md "Agent loss",
 * `SVCD_AGENT_LOST_AUTO`): with the setting on, an agent silent past `SVCD_AGENT_LOST_AFTER_S` is
 * declared lost without an operator, and its project comes back on the other agent from its
 * off-machine copy. Needs dist/worker.js (`npm test` builds it first).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { getAgent } from '../../shared/db/agents.ts';
import { createDb, type Db } from '../../shared/db/client.ts';
import { getProject } from '../../shared/db/projects.ts';
import { tempDir } from '../helpers/env.ts';
import { startAgentsStack } from '../helpers/stack.ts';

const dir = tempDir('svc-durability-auto-');
let stack: Stack;
let db: Db;
let token: string;

async function ok(method: string, path: string, body?: unknown): Promise<any> {
  const r = await fetch(`${stack.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

async function until(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; ) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return check();
}

beforeAll(async () => {
  stack = await startAgentsStack(dir.dir, 2, { SVCD_AGENT_LOST_AUTO: 'true', SVCD_AGENT_LOST_AFTER_S: '2' });
  db = createDb(stack.settings);
  token = ((await (await fetch(`${stack.url}/v0/signup`, { method: 'POST', body: '{}' })).json()) as { token: string }).token;
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  dir.cleanup();
});

describe('SVCD_AGENT_LOST_AUTO', () => {
  it('a silent agent is declared lost by the live one, and its project comes back from its off-machine copy', async () => {
    const p = await ok('POST', '/v0/projects', { name: 'auto-lost' });
    const second = stack.agents[1]!;
    if ((await getProject(db, p.id))!.agent_id !== second.id) await ok('POST', `/v0/projects/${p.id}/relocate`, { target_agent: second.id });
    await ok('POST', `/v0/projects/${p.id}/wakeup`);
    await ok('POST', `/v0/projects/${p.id}/sleep`);
    const snap = await ok('POST', `/v0/projects/${p.id}/snapshots`, {});
    expect(await until(async () => (await ok('GET', `/v0/projects/${p.id}/snapshots/${snap.id}`)).offsite.state === 'complete', 20_000)).toBe(true);

    second.process.kill('SIGKILL');
    // Nobody calls `svc-agent lost`: the live agent declares it once it is 2 s silent.
    expect(await until(async () => (await getProject(db, p.id))!.agent_id === stack.agents[0]!.id, 30_000)).toBe(true);
    expect((await getAgent(db, second.id))?.status).toBe('lost');
    const back = await ok('GET', `/v0/projects/${p.id}`);
    expect(back.state).toBe('sleeping');
    expect(back.restored_from).toMatchObject({ snapshot_id: snap.id, reason: 'agent_lost', lost_agent: second.id });
  }, 120_000);
});
