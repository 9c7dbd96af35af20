/**
 * Capacity (docs/lifecycle.md "Capacity"): an agent's `SVCD_AGENT_CAPACITY` bounds the engines it
 * runs at once, not the projects placed on it. Projects are reserved without that limit; a wakeup
 * past it answers 503 `orchestrator_unavailable` naming the limit and writes nothing.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getProject } from '../../shared/db/projects.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { call, createProject, sleep, wake } from '../helpers/lifecycle.ts';

let svc: TestService;
let token: string;

beforeAll(async () => {
  svc = await startTestService({ SVCD_AGENT_CAPACITY: '2' });
  ({ token } = await signup(svc));
});

afterAll(async () => {
  await svc?.stop();
});

describe('agent capacity', () => {
  it('counts running engines: projects past it are reserved, a wakeup past it is 503 and writes nothing', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await createProject(svc, token, `cap-${i}`));
    const [a, b, c] = ids as [string, string, string];
    await wake(svc, token, a);
    await wake(svc, token, b);

    const refused = await call(svc, 'POST', `/v0/projects/${c}/wakeup`, token);
    expect(refused.status, JSON.stringify(refused.body)).toBe(503);
    expect(refused.body.error.code).toBe('orchestrator_unavailable');
    expect(refused.body.error.message).toMatch(/at most 2 engines/);
    expect((await getProject(svc.db, c))!.state).toBe('stopped');
    expect(existsSync(svc.agent.ctx.tenants.layout.tenantDir(c))).toBe(false);
    expect(svc.agent.ctx.tenants.runningProjects().sort()).toEqual([a, b].sort());

    // An engine slot freed is an engine slot taken.
    await sleep(svc, token, a);
    await wake(svc, token, c);
  });

  it('counts engines still starting: of concurrent wakeups only as many as the capacity succeed', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await createProject(svc, token, `burst-${i}`));
    for (const id of svc.agent.ctx.tenants.runningProjects()) await sleep(svc, token, id);
    const answers = await Promise.all(ids.map((id) => call(svc, 'POST', `/v0/projects/${id}/wakeup`, token)));
    expect(answers.map((r) => r.status).sort()).toEqual([200, 200, 503, 503]);
    expect(svc.agent.ctx.tenants.runningProjects()).toHaveLength(2);
  });
});
