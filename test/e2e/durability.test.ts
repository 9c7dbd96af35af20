/**
 * A project outlives its machine (docs/durability.md), over HTTP through the base URL of a local
 * stack with two agents sharing one table and one off-machine store: relocation (data, objects,
 * keys, /v2 at once; the old copy gone), the authorization matrix of the relocate route, a fork, and
 * the agent-loss drill (rows written after the last off-machine copy are the recovery-point loss;
 * the agent that comes back serves nothing it hosted). Needs dist/worker.js (`npm test` builds it).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../client/index.ts';
import type { Stack } from '../../infra/local/stack.ts';
import { getAgent } from '../../shared/db/agents.ts';
import { createDb, type Db } from '../../shared/db/client.ts';
import { REPO, tempDir } from '../helpers/env.ts';
import { startAgentsStack } from '../helpers/stack.ts';
import { FunctionsClient, httpSend, MODULES } from '../helpers/functions.ts';
import { checkedJson } from '../helpers/openapi.ts';

const dir = tempDir('svc-durability-');
let stack: Stack;
let db: Db;
let token: string;

async function call(method: string, path: string, body?: unknown, auth: string | null = token): Promise<Response> {
  return fetch(`${stack.url}${path}`, {
    method,
    headers: { ...(auth === null ? {} : { authorization: `Bearer ${auth}` }), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

async function ok(method: string, path: string, body?: unknown): Promise<any> {
  const r = await call(method, path, body);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
  return checkedJson(stack.url, method, path, r);
}

async function codeOf(r: Response): Promise<string> {
  return ((await r.json()) as { error: { code: string } }).error.code;
}

/** A project, running, with a key and a table of `rows` rows. */
async function seeded(name: string, rows: number): Promise<{ id: string; key: string }> {
  const p = await ok('POST', '/v0/projects', { name });
  await ok('POST', `/v0/projects/${p.id}/wakeup`);
  const key = (await ok('POST', `/v0/projects/${p.id}/keys`, {})).key as string;
  const sql = createClient({ baseUrl: stack.url, key });
  await sql.sql('CREATE TABLE t (n INTEGER PRIMARY KEY, v TEXT)');
  await insertRows(key, 1, rows);
  return { id: p.id, key };
}

async function insertRows(key: string, from: number, to: number): Promise<void> {
  await createClient({ baseUrl: stack.url, key }).sql(
    `WITH RECURSIVE c(x) AS (SELECT ${from} UNION ALL SELECT x + 1 FROM c WHERE x < ${to}) INSERT INTO t (n, v) SELECT x, 'row ' || x FROM c`,
  );
}

async function rowStats(key: string): Promise<{ n: number; max: number }> {
  const rs = await createClient({ baseUrl: stack.url, key }).sql('SELECT count(*) AS n, max(n) AS max FROM t');
  return rs.rows[0] as unknown as { n: number; max: number };
}

/** Waits until the snapshot's off-machine copy is complete (copied in the background after the 201). */
async function offsiteComplete(projectId: string, snapshotId: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const s = await ok('GET', `/v0/projects/${projectId}/snapshots/${snapshotId}`);
    if (s.offsite.state === 'complete') return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`snapshot ${snapshotId} was never copied off the machine`);
}

/** `bin/svc-agent <args>` against the agent at `agentUrl` (the operator's command, as on its machine). */
function svcAgent(agentUrl: string, ...args: string[]): { code: number | null; out: string } {
  const r = spawnSync(join(REPO, 'bin/svc-agent'), args, {
    env: { PATH: process.env.PATH!, ...stack.env, SVCD_AGENT_URL: agentUrl },
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

beforeAll(async () => {
  stack = await startAgentsStack(dir.dir, 2, { SVCD_AGENT_LOST_AFTER_S: '4' });
  db = createDb(stack.settings);
  const su = await fetch(`${stack.url}/v0/signup`, { method: 'POST', body: '{}' });
  token = ((await su.json()) as { token: string }).token;
}, 120_000);

afterAll(async () => {
  if (process.env.DEBUG_DURABILITY) for (const a of stack?.agents ?? []) console.log(a.log().split('\n').filter((l) => /rror|fail/.test(l)).join('\n'));
  await stack?.stop();
  dir.cleanup();
});

const agentIndex = (agentId: string) => stack.agents.findIndex((a) => a.id === agentId);

describe('relocation', () => {
  it('moves a sleeping project with its rows, objects and keys; the old agent keeps nothing of it', async () => {
    const p = await seeded('mover', 500);
    await ok('PUT', `/v0/projects/${p.id}/storage/buckets/files`);
    const put = await fetch(`${stack.url}/v0/projects/${p.id}/storage/objects/files/hello.txt`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' },
      body: 'hello from the first machine',
    });
    expect(put.status).toBeLessThan(300);
    const fns = new FunctionsClient(httpSend(stack.url));
    expect((await fns.deploy(token, p.id, 'echo', MODULES.echo)).status).toBe(201);
    const before = (await ok('GET', `/v0/projects/${p.id}`)).agent_id as string;
    const from = agentIndex(before);

    const running = await call('POST', `/v0/projects/${p.id}/relocate`, {});
    expect(running.status).toBe(409);
    expect(await codeOf(running)).toBe('tenant_running');

    await ok('POST', `/v0/projects/${p.id}/sleep`);
    const moved = await ok('POST', `/v0/projects/${p.id}/relocate`, {});
    expect(moved.agent_id).toBe(stack.agents[1 - from]!.id);
    expect(moved.state).toBe('sleeping');
    expect(existsSync(join(stack.agents[from]!.root, 'tenants', p.id))).toBe(false);
    expect(existsSync(join(stack.agents[1 - from]!.root, 'tenants', p.id, 'data'))).toBe(true);

    await ok('POST', `/v0/projects/${p.id}/wakeup`);
    expect(await rowStats(p.key)).toEqual({ n: 500, max: 500 });
    const object = await fetch(`${stack.url}/v0/projects/${p.id}/storage/objects/files/hello.txt`, { headers: { authorization: `Bearer ${token}` } });
    expect(object.status).toBe(200);
    expect(await object.text()).toBe('hello from the first machine');
    // The function's module moved with the project's blobs: it answers from the new agent.
    const invoked = await fns.invoke(token, p.id, 'echo', '/after-the-move');
    expect(invoked.status, await invoked.clone().text()).toBe(201);
    expect(((await invoked.json()) as { path: string }).path).toBe('/after-the-move');
    const receipts = await ok('GET', `/v0/receipts?project=${p.id}`);
    expect(receipts.receipts.map((r: { op: string }) => r.op)).toContain('project.relocate');
    await ok('POST', `/v0/projects/${p.id}/sleep`);
  }, 120_000);

  it('refuses what it must: no session 401, another account 404, a bad body 400, an unknown target 400', async () => {
    const p = await ok('POST', '/v0/projects', { name: 'matrix' });
    expect((await call('POST', `/v0/projects/${p.id}/relocate`, {}, null)).status).toBe(401);
    const other = ((await (await fetch(`${stack.url}/v0/signup`, { method: 'POST', body: '{}' })).json()) as { token: string }).token;
    expect((await call('POST', `/v0/projects/${p.id}/relocate`, {}, other)).status).toBe(404);
    const bad = await call('POST', `/v0/projects/${p.id}/relocate`, { target_agent: 'nope' });
    expect(bad.status).toBe(400);
    const extra = await call('POST', `/v0/projects/${p.id}/relocate`, { what: 1 });
    expect(extra.status).toBe(400);
    const unknown = await call('POST', `/v0/projects/${p.id}/relocate`, { target_agent: 'agt_0000000000000000' });
    expect(unknown.status).toBe(400);
    // A project never started moves too: nothing to copy, it stays stopped.
    const moved = await ok('POST', `/v0/projects/${p.id}/relocate`, {});
    expect(moved.state).toBe('stopped');
  }, 60_000);
});

describe('fork', () => {
  it('creates a project whose data is a snapshot of one the caller owns', async () => {
    const p = await seeded('origin', 300);
    await ok('POST', `/v0/projects/${p.id}/sleep`);
    const snap = await ok('POST', `/v0/projects/${p.id}/snapshots`, { label: 'for a preview' });
    const fork = await ok('POST', '/v0/projects', { name: 'preview', from_snapshot: snap.id });
    expect(fork.state).toBe('sleeping');
    expect(fork.id).not.toBe(p.id);
    await ok('POST', `/v0/projects/${fork.id}/wakeup`);
    const key = (await ok('POST', `/v0/projects/${fork.id}/keys`, {})).key as string;
    expect(await rowStats(key)).toEqual({ n: 300, max: 300 });
    // Writes to the fork leave the original alone.
    await insertRows(key, 301, 310);
    await ok('POST', `/v0/projects/${p.id}/wakeup`);
    expect(await rowStats(p.key)).toEqual({ n: 300, max: 300 });
    const other = ((await (await fetch(`${stack.url}/v0/signup`, { method: 'POST', body: '{}' })).json()) as { token: string }).token;
    const theirs = await call('POST', '/v0/projects', { name: 'stolen', from_snapshot: snap.id }, other);
    expect(theirs.status).toBe(404);
    // Naming the project too changes nothing: it is not theirs.
    const named = await call('POST', '/v0/projects', { name: 'stolen', from_snapshot: snap.id, from_project: p.id }, other);
    expect(named.status).toBe(404);
    expect((await call('GET', '/v0/projects', undefined, other).then((r) => r.json())).projects).toEqual([]);
    await ok('POST', `/v0/projects/${p.id}/sleep`);
    await ok('POST', `/v0/projects/${fork.id}/sleep`);
  }, 120_000);
});

describe('the CLI', () => {
  it('forks from a snapshot and relocates a project', async () => {
    const svc = (...args: string[]) => {
      const r = spawnSync(join(REPO, 'bin/svc'), [...args, '--json'], {
        env: { PATH: process.env.PATH!, HOME: dir.dir, SVC_CONFIG_DIR: join(dir.dir, 'cli'), SVC_BASE_URL: stack.url, SVC_TOKEN: token },
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(r.status, r.stdout + r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { id: string; agent_id: string; state: string };
    };
    const p = await seeded('cli-origin', 20);
    await ok('POST', `/v0/projects/${p.id}/sleep`);
    const snap = await ok('POST', `/v0/projects/${p.id}/snapshots`, {});
    const fork = svc('projects', 'create', 'cli-fork', '--from-snapshot', snap.id);
    expect(fork.state).toBe('sleeping');
    const other = stack.agents.find((a) => a.id !== fork.agent_id)!.id;
    const moved = svc('projects', 'relocate', fork.id, '--to', other);
    expect(moved.agent_id).toBe(other);
  }, 120_000);
});

describe('agent loss', () => {
  let drilled = '';

  it("brings a lost agent's project back from its newest off-machine copy; rows after it are the recovery-point loss", async () => {
    const p = await seeded('drill', 10_000);
    drilled = p.id;
    await ok('POST', `/v0/projects/${p.id}/sleep`);
    // The drill's project lives on the second agent (the first serves the base URL).
    const placed = (await ok('GET', `/v0/projects/${p.id}`)).agent_id as string;
    if (placed !== stack.agents[1]!.id) await ok('POST', `/v0/projects/${p.id}/relocate`, { target_agent: stack.agents[1]!.id });
    const snap = await ok('POST', `/v0/projects/${p.id}/snapshots`, { label: 'backup' });
    await offsiteComplete(p.id, snap.id);
    await ok('POST', `/v0/projects/${p.id}/wakeup`);
    await insertRows(p.key, 10_001, 10_500);
    expect(await rowStats(p.key)).toEqual({ n: 10_500, max: 10_500 });

    const lost = stack.agents[1]!;
    // A live agent cannot be declared lost: it heartbeats (asked of the other agent).
    const early = svcAgent(stack.agents[1]!.internalUrl, 'lost', stack.agents[0]!.id);
    expect(early.code).toBe(1);
    expect(early.out).toContain('SVCD_AGENT_LOST_AFTER_S');
    // The machine is lost: its agent and its engines die with it (an engine's process group is its pid).
    lost.process.kill('SIGKILL');
    for (const record of readdirSync(join(lost.root, 'run')).filter((f) => f.endsWith('.json'))) {
      const { pid } = JSON.parse(readFileSync(join(lost.root, 'run', record), 'utf8')) as { pid: number };
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    rmSync(lost.root, { recursive: true, force: true });
    await new Promise((r) => setTimeout(r, 4_500));
    const declared = svcAgent(stack.agents[0]!.internalUrl, 'lost', lost.id);
    expect(declared.out).toContain(`moved ${p.id} to ${stack.agents[0]!.id}`);
    expect(declared.code).toBe(0);

    const back = await ok('GET', `/v0/projects/${p.id}`);
    expect(back.agent_id).toBe(stack.agents[0]!.id);
    expect(back.state).toBe('sleeping');
    expect(back.restored_from).toMatchObject({ snapshot_id: snap.id, reason: 'agent_lost', lost_agent: lost.id });
    await ok('POST', `/v0/projects/${p.id}/wakeup`);
    expect(await rowStats(p.key)).toEqual({ n: 10_000, max: 10_000 });
    expect((await getAgent(db, lost.id))?.status).toBe('lost');
  }, 180_000);

  it('the lost agent that comes back serves none of its old projects and takes projects again once none is left on it', async () => {
    // What the lost machine kept of the project (had its disk come back): removed at its start, never served.
    const kept = join(stack.agents[1]!.root, 'tenants', drilled, 'data');
    mkdirSync(kept, { recursive: true });
    writeFileSync(join(kept, 'data.sqlite'), 'stale');
    const returned = await stack.restartAgent(1);
    expect(existsSync(join(returned.root, 'tenants', drilled))).toBe(false);
    for (let i = 0; i < 100 && (await getAgent(db, returned.id))?.status === 'lost'; i++) await new Promise((r) => setTimeout(r, 200));
    expect((await getAgent(db, returned.id))?.status).toBeUndefined();
  }, 60_000);
});
