/**
 * An engine killed behind the agent's back (docs/lifecycle.md "States", docs/dataplane.md): every
 * `/v2` request sent after the kill answers 409 `tenant_not_running`, never 502, whether the agent
 * started the engine (its exit is awaited) or adopted it from a previous agent (its exit is polled),
 * and the recorded state is corrected to `sleeping`. The agent runs as its own process.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Layout } from '../../host-agent/tenants/layout.ts';
import { getAgent } from '../../shared/db/agents.ts';
import type { Db } from '../../shared/db/client.ts';
import { getProject } from '../../shared/db/projects.ts';
import { ChildAgent, startChildDeployment, type ChildDeployment } from '../helpers/child-agent.ts';
import { call, pidAlive, wake, waitFor, type Api } from '../helpers/lifecycle.ts';

let d: ChildDeployment;
let agent: ChildAgent;
let db: Db;
let layout: Layout;
let token: string;
const api: Api = { request: (...args) => d.api.request(...args) };

beforeAll(async () => {
  d = await startChildDeployment('svc-engine-killed-');
  ({ agent, db, layout, token } = d);
});

afterAll(() => d?.stop());

/** A running project, a key for it, and the /v2 URL of its agent. */
async function runningProject(): Promise<{ id: string; key: string; v2: string }> {
  const created = await call(api, 'POST', '/v0/projects', token, { name: 'killed' });
  const id = created.body.id as string;
  await wake(api, token, id);
  const key = (await call(api, 'POST', `/v0/projects/${id}/keys`, token, {})).body.key as string;
  const agentId = (await getProject(db, id))!.agent_id;
  return { id, key, v2: (await getAgent(db, agentId))!.dataplane_url };
}

function capabilities(t: { key: string; v2: string }): Promise<{ status: number; code: string | null }> {
  return fetch(`${t.v2}/v2/capabilities`, { headers: { authorization: `Bearer ${t.key}`, 'x-svc-protocol-minor': '3' } }).then(async (r) => {
    const text = await r.text();
    let code: string | null = null;
    try {
      code = JSON.parse(text).error?.code ?? null;
    } catch {
      // The engine's envelope, not JSON.
    }
    return { status: r.status, code };
  });
}

/** SIGKILLs the project's engine, then sends requests at once, several at a time for a while. */
async function killAndAsk(t: { id: string; key: string; v2: string }): Promise<{ status: number; code: string | null }[]> {
  const { pid } = JSON.parse(readFileSync(layout.runRecord(t.id), 'utf8')) as { pid: number };
  expect((await capabilities(t)).status).toBe(200);
  process.kill(pid, 'SIGKILL');
  const answers: { status: number; code: string | null }[] = [];
  const until = Date.now() + 150;
  while (Date.now() < until) answers.push(...(await Promise.all([capabilities(t), capabilities(t), capabilities(t)])));
  expect(await waitFor(() => !pidAlive(pid), 5000)).toBe(true);
  return answers;
}

describe('an engine killed behind the agent’s back', () => {
  it('started by this agent: every /v2 request after the kill is 409 tenant_not_running, and the state is corrected', async () => {
    const t = await runningProject();
    const answers = await killAndAsk(t);
    expect(answers.filter((a) => a.status !== 409 || a.code !== 'tenant_not_running')).toEqual([]);
    expect(await waitFor(async () => (await getProject(db, t.id))!.state === 'sleeping', 5000)).toBe(true);
  });

  it('adopted from a previous agent: every /v2 request after the kill is 409 tenant_not_running, and the state is corrected', async () => {
    const t = await runningProject();
    await agent.kill9();
    await agent.start();
    // The restarted agent listens on a new port (port 0): ask where.
    t.v2 = (await getAgent(db, (await getProject(db, t.id))!.agent_id))!.dataplane_url;
    const answers = await killAndAsk(t);
    expect(answers.filter((a) => a.status !== 409 || a.code !== 'tenant_not_running')).toEqual([]);
    expect(await waitFor(async () => (await getProject(db, t.id))!.state === 'sleeping', 5000)).toBe(true);
    // An agent's kill and start, with its start-up sweeps, beside a whole suite on two cores.
  }, 60_000);
});
