/**
 * Relocation and drain under kill -9 (docs/durability.md "Relocation", "Drain"): two agents of a
 * local stack; a relocation is cut at a random point by SIGKILL of the source or the target agent,
 * which is started again; the project is then whole on exactly the agent its record names — its
 * rows, its object — and served from there. Then `bin/svc-agent drain` empties one agent (a running
 * tenant runs again on the other) and placement skips it until `undrain`.
 * Needs dist/worker.js (`npm test` builds it first).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../client/index.ts';
import type { Stack } from '../../infra/local/stack.ts';
import { agentIsLive, getAgent } from '../../shared/db/agents.ts';
import { createDb, type Db } from '../../shared/db/client.ts';
import { getProject } from '../../shared/db/projects.ts';
import { REPO, tempDir } from '../helpers/env.ts';
import { startAgentsStack } from '../helpers/stack.ts';

const dir = tempDir('svc-durability-crash-');
let stack: Stack;
let db: Db;
let token: string;
const ROWS = 2_000;

async function call(method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${stack.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    // A request caught by a kill must not hold the suite: it is answered or given up within a minute.
    signal: AbortSignal.timeout(60_000),
  });
}

async function ok(method: string, path: string, body?: unknown): Promise<any> {
  for (let attempt = 0; ; attempt++) {
    const r = await call(method, path, body);
    // While a killed agent starts again its projects answer 503: wait for it.
    if (r.status === 503 && attempt < 100) {
      await new Promise((res) => setTimeout(res, 200));
      continue;
    }
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
    return r.headers.get('content-type')?.includes('json') ? r.json() : r.text();
  }
}

async function liveAgain(index: number): Promise<void> {
  await stack.restartAgent(index);
  for (let i = 0; i < 100; i++) {
    const a = await getAgent(db, stack.agents[index]!.id);
    if (a && agentIsLive(a, 1500)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`agent ${index} did not come back`);
}

/** The project is whole where its record says: rows and object served through the base URL. */
async function wholeWhereRecorded(projectId: string, key: string): Promise<string> {
  const owner = (await getProject(db, projectId))!.agent_id;
  const index = stack.agents.findIndex((a) => a.id === owner);
  expect(existsSync(join(stack.agents[index]!.root, 'tenants', projectId, 'data'))).toBe(true);
  await ok('POST', `/v0/projects/${projectId}/wakeup`);
  const rs = await createClient({ baseUrl: stack.url, key }).sql('SELECT count(*) AS n FROM t');
  expect(rs.rows[0]!.n).toBe(ROWS);
  const object = await call('GET', `/v0/projects/${projectId}/storage/objects/files/kept.txt`);
  expect(await object.text()).toBe('kept through every move');
  await ok('POST', `/v0/projects/${projectId}/sleep`);
  return owner;
}

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

describe('relocation cut by kill -9', () => {
  it('leaves the project whole on one agent, whichever agent dies and wherever', async () => {
    const p = await ok('POST', '/v0/projects', { name: 'crash-mover' });
    await ok('POST', `/v0/projects/${p.id}/wakeup`);
    const key = (await ok('POST', `/v0/projects/${p.id}/keys`, {})).key as string;
    const sql = createClient({ baseUrl: stack.url, key });
    await sql.sql('CREATE TABLE t (n INTEGER PRIMARY KEY, v TEXT)');
    await sql.sql(`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ${ROWS}) INSERT INTO t SELECT x, hex(randomblob(64)) FROM c`);
    await ok('PUT', `/v0/projects/${p.id}/storage/buckets/files`);
    await ok('PUT', `/v0/projects/${p.id}/storage/objects/files/kept.txt`, 'kept through every move');
    await ok('POST', `/v0/projects/${p.id}/sleep`);

    // One clean move, to know how long a move takes here.
    const started = Date.now();
    await ok('POST', `/v0/projects/${p.id}/relocate`, {});
    const spanMs = Date.now() - started;
    await wholeWhereRecorded(p.id, key);

    for (let round = 0; round < 3; round++) {
      const hostedBy = (await getProject(db, p.id))!.agent_id;
      const source = stack.agents.findIndex((a) => a.id === hostedBy);
      const victim = round % 2 === 0 ? source : 1 - source;
      const moving = call('POST', `/v0/projects/${p.id}/relocate`, {}).then((r) => r.status, () => 0);
      await new Promise((r) => setTimeout(r, Math.random() * spanMs));
      stack.agents[victim]!.process.kill('SIGKILL');
      const status = await moving;
      expect([200, 409, 500, 502, 503, 0]).toContain(status);
      await liveAgain(victim);
      const owner = await wholeWhereRecorded(p.id, key);
      // The agent that does not host it serves nothing of it (a copy it took in and never got is only kept, marked, not served).
      const other = stack.agents.find((a) => a.id !== owner)!;
      const leftover = join(other.root, 'tenants', p.id);
      if (existsSync(leftover)) expect(existsSync(join(leftover, 'received.json'))).toBe(true);
    }
  }, 420_000);
});

describe('drain', () => {
  it('moves every project off an agent (running ones run again), and placement skips it until undrain', async () => {
    const made = [];
    for (let i = 0; i < 4; i++) made.push(await ok('POST', '/v0/projects', { name: `drained-${i}` }));
    const drained = stack.agents[1]!;
    const onIt = [];
    for (const p of made) if ((await getProject(db, p.id))!.agent_id === drained.id) onIt.push(p.id);
    expect(onIt.length).toBeGreaterThan(0);
    await ok('POST', `/v0/projects/${onIt[0]}/wakeup`);

    const run = (...args: string[]) =>
      spawnSync(join(REPO, 'bin/svc-agent'), args, {
        env: { PATH: process.env.PATH!, ...stack.env, SVCD_AGENT_URL: drained.internalUrl },
        encoding: 'utf8',
        timeout: 120_000,
      });
    const drain = run('drain');
    expect(drain.status, drain.stdout + drain.stderr).toBe(0);
    expect(drain.stdout).toContain(' 0 failed');
    for (const id of onIt) expect((await getProject(db, id))!.agent_id).toBe(stack.agents[0]!.id);
    expect((await ok('GET', `/v0/projects/${onIt[0]}`)).state).toBe('running');
    expect((await getAgent(db, drained.id))?.status).toBe('draining');
    for (let i = 0; i < 3; i++) expect((await getProject(db, (await ok('POST', '/v0/projects', { name: `after-${i}` })).id))!.agent_id).toBe(stack.agents[0]!.id);

    const undrain = run('undrain');
    expect(undrain.status).toBe(0);
    expect((await getAgent(db, drained.id))?.status).toBeUndefined();
    expect(run('lost', 'nonsense').status).toBe(2);
  }, 300_000);
});
