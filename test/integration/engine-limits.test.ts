/**
 * A tenant's runaway or greedy statement, through the agent's `/v2` listener (docs/engine.md
 * "Statement time limit", docs/lifecycle.md "Engine isolation"): the agent starts engines with
 * `SVCD_ENGINE_STATEMENT_TIMEOUT_MS`, so a statement past it answers the engine's enveloped
 * `statement_timeout` and the tenant's next request is served at once; a statement that allocates past
 * the engine's cgroup memory limit (`SVCD_ENGINE_MEMORY_MB`) answers `statement_aborted`, and the
 * engine, still the same process, serves on. Another tenant is never disturbed.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CgroupHost } from '../../host-agent/sandbox/cgroups.ts';
import { decodeEnvelope } from '../helpers/envelope.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

const LIMIT_MS = 3000;
const RUNAWAY = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 300000000) SELECT count(*) FROM c';

let svc: TestService;
let token: string;

beforeAll(async () => {
  // A limit long enough that a 400 MB allocation meets the memory limit first, even on a loaded machine.
  svc = await startTestService({ SVCD_ENGINE_STATEMENT_TIMEOUT_MS: String(LIMIT_MS), SVCD_ENGINE_MEMORY_MB: '192' });
  ({ token } = await signup(svc));
}, 120_000);

afterAll(async () => {
  await svc?.stop();
});

/** A running project and a key for it. */
async function tenant(name: string): Promise<{ id: string; key: string }> {
  const id = ((await (await svc.request('POST', '/v0/projects', { token, body: { name } })).json()) as { id: string }).id;
  const key = ((await (await svc.request('POST', `/v0/projects/${id}/keys`, { token, body: {} })).json()) as { key: string }).key;
  expect((await svc.request('POST', `/v0/projects/${id}/wakeup`, { token })).status).toBe(200);
  return { id, key };
}

/** POST /v2/sql through the agent's listener; answers the status and the decoded envelope. */
async function sql(t: { key: string }, statement: string): Promise<{ status: number; body: any }> {
  const r = await fetch(`${svc.agent.dataplaneUrl}/v2/sql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${t.key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
    body: JSON.stringify({ sql: statement }),
  });
  return { status: r.status, body: decodeEnvelope(new Uint8Array(await r.arrayBuffer())) };
}

const pidOf = (id: string) => (JSON.parse(readFileSync(svc.agent.ctx.tenants.layout.runRecord(id), 'utf8')) as { pid: number }).pid;

describe('a tenant’s statements', () => {
  it('past SVCD_ENGINE_STATEMENT_TIMEOUT_MS answer statement_timeout; the next request and other tenants are served at once', async () => {
    const [greedy, other] = await Promise.all([tenant('runaway'), tenant('neighbour')]);
    const pid = pidOf(greedy.id);
    const started = Date.now();
    const [runaway, neighbour] = await Promise.all([sql(greedy, RUNAWAY), sql(other, 'SELECT 1')]);
    expect(runaway.status).toBe(400);
    expect(runaway.body.error.code).toBe('statement_timeout');
    expect(Date.now() - started).toBeGreaterThanOrEqual(LIMIT_MS - 10);
    expect(Date.now() - started).toBeLessThan(LIMIT_MS + 2500);
    expect(neighbour.status).toBe(200);
    const next = Date.now();
    expect((await sql(greedy, 'SELECT 2 AS n')).body.results[0].rows).toEqual([[2]]);
    expect(Date.now() - next).toBeLessThan(2000);
    // The same engine serves on: nothing was restarted behind the agent's back.
    expect(pidOf(greedy.id)).toBe(pid);
    expect(svc.agent.ctx.tenants.liveEndpoint(greedy.id)).not.toBeNull();
  });

  const cgroups = CgroupHost.detect();
  it.skipIf(typeof cgroups === 'string')(
    `past the engine’s memory limit answer statement_aborted, and the engine serves on${typeof cgroups === 'string' ? ` (skipped: ${cgroups})` : ''}`,
    async () => {
      const greedy = await tenant('greedy');
      const pid = pidOf(greedy.id);
      const group = svc.agent.ctx.tenants.launch.cgroups!.open(svc.agent.ctx.tenants.launch.groupName(greedy.id));
      const r = await sql(greedy, 'SELECT length(randomblob(400000000))');
      expect(r.status).toBe(500);
      expect(r.body.error.code).toBe('statement_aborted');
      expect(group.oomKilled()).toBe(true);
      expect((await sql(greedy, 'SELECT 3 AS n')).body.results[0].rows).toEqual([[3]]);
      expect(pidOf(greedy.id)).toBe(pid);
    },
  );
});
