/**
 * Crash safety of a project's deletion (docs/lifecycle.md "Deleting a project"): the host agent runs
 * as its own process (`bin/svc-agent`) and is SIGKILLed at a random point of a `DELETE
 * /v0/projects/{id}` — a random moment after the request, or a random moment after each step the
 * agent logs (`marked deleting`, `directories removed`, `items removed`) — then started again.
 * Afterwards the project is either whole (not committed: readable, its rows and keys intact, its
 * state true) or gone everywhere at once (404, its key 401 on `/v2`), and the restarted agent
 * finishes the deletion: nothing of it is left but its receipts and its deletion record. A handler
 * that goes away mid-deletion (its connection to the agent cut) changes nothing: the agent finishes.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Layout } from '../../host-agent/tenants/layout.ts';
import { issueInternalToken } from '../../shared/auth.ts';
import { listAgents } from '../../shared/db/agents.ts';
import type { Db } from '../../shared/db/client.ts';
import { lookupKey } from '../../shared/db/keys.ts';
import { getProjectDeletion } from '../../shared/db/project-delete.ts';
import { getProject } from '../../shared/db/projects.ts';
import { keys as tableKeys } from '../../shared/db/table.ts';
import { ChildAgent, processesWith, startChildDeployment, type ChildDeployment } from '../helpers/child-agent.ts';
import { decodeEnvelope } from '../helpers/envelope.ts';
import { call, sleep, wake, waitFor, type Api } from '../helpers/lifecycle.ts';

let d: ChildDeployment;
let agent: ChildAgent;
let db: Db;
let layout: Layout;
let root: { dir: string };
let token: string;
const api: Api = { request: (...args) => d.api.request(...args) };

beforeAll(async () => {
  d = await startChildDeployment('svc-delete-crash-');
  ({ agent, db, layout, root, token } = d);
});

afterAll(() => d?.stop());

/** mulberry32 over a seed printed with the test, so a failing run can be replayed. */
const SEED = Number(process.env.DELETE_CRASH_SEED ?? Date.now() % 1_000_000);
let state = SEED;
function random(): number {
  state = (state + 0x6d2b79f5) | 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

/** Where the agent's `/v2` listener answers now (it registers a fresh port at every start). */
async function dataplaneUrl(): Promise<string> {
  const [registered] = await listAgents(db);
  return registered!.dataplane_url;
}

async function v2(key: string, sql: string): Promise<{ status: number; body: any }> {
  const r = await fetch(`${await dataplaneUrl()}/v2/sql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
    body: JSON.stringify({ sql, params: [] }),
  });
  const bytes = new Uint8Array(await r.arrayBuffer());
  const enveloped = r.headers.get('content-type')?.includes('product') ?? false;
  return { status: r.status, body: enveloped ? decodeEnvelope(bytes) : JSON.parse(new TextDecoder().decode(bytes)) };
}

/**
 * A running project with rows written through `/v2`, a snapshot, a previous directory, many keys
 * and buckets (so that removing its items takes several transactions), and a secret.
 */
async function fullProject(): Promise<{ id: string; key: string; keyId: string }> {
  const created = await call(api, 'POST', '/v0/projects', token, { name: 'crash' });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  const issued = await call(api, 'POST', `/v0/projects/${id}/keys`, token, {});
  const key = issued.body.key as string;
  await wake(api, token, id);
  expect((await v2(key, 'CREATE TABLE t (v TEXT)')).status).toBe(200);
  expect((await v2(key, "INSERT INTO t VALUES ('kept')")).status).toBe(200);
  await sleep(api, token, id);
  const snap = await call(api, 'POST', `/v0/projects/${id}/snapshots`, token, {});
  expect(snap.status).toBe(201);
  expect((await call(api, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snap.body.id })).status).toBe(200);
  await Promise.all(Array.from({ length: 150 }, (_, i) => call(api, 'PUT', `/v0/projects/${id}/storage/buckets/bucket-${i}`, token)));
  await Promise.all(Array.from({ length: 30 }, () => call(api, 'POST', `/v0/projects/${id}/keys`, token, {})));
  expect((await call(api, 'PUT', `/v0/projects/${id}/functions/secrets/TOKEN`, token, { value: 'v' })).status).toBe(201);
  await wake(api, token, id);
  return { id, key, keyId: issued.body.key_id as string };
}

/** The sort keys of the project's partition that are neither receipts nor the deletion record. */
async function leftItems(projectId: string): Promise<string[]> {
  const out = await db.doc.send(
    new QueryCommand({
      TableName: db.table,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': tableKeys.project(projectId).pk },
      ConsistentRead: true,
    }),
  );
  return (out.Items ?? []).map((i) => String(i.sk)).filter((sk) => !sk.startsWith('RCPT#') && sk !== 'GONE');
}

/** Restarts the agent once the engine commands the killed one left have finished. */
async function restart(projectId: string): Promise<void> {
  await waitFor(() => processesWith('engine/main.ts', projectId).filter((pid) => !isServe(pid)).length === 0, 15_000);
  await agent.start();
}

function isServe(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('serve');
  } catch {
    return false;
  }
}

/** The kill points: a line the agent logs for the project (null: right after the request), then a random pause. */
const POINTS: { name: string; line: (id: string) => RegExp | null; pauseMs: number }[] = [
  { name: 'during the request', line: () => null, pauseMs: 400 },
  { name: 'after the commit point', line: (id) => new RegExp(`deleting ${id}: marked deleting`), pauseMs: 20 },
  { name: 'after the directories', line: (id) => new RegExp(`deleting ${id}: directories removed`), pauseMs: 60 },
  { name: 'after the items', line: (id) => new RegExp(`deleting ${id}: \\d+ items removed`), pauseMs: 5 },
];

/** What each kill left before the restart: not committed, committed and unfinished, or finished. */
const outcomes: ('whole' | 'deleting' | 'deleted')[] = [];

describe(`SIGKILL of the agent during a project's deletion (seed ${SEED})`, () => {
  for (const point of POINTS) {
    it(`${point.name}: the project is whole or gone, and the next start finishes the deletion`, async () => {
      const { id, key, keyId } = await fullProject();
      const from = agent.output.length;
      const pending = call(api, 'DELETE', `/v0/projects/${id}`, token);
      const line = point.line(id);
      if (line) expect(await agent.logLine(line, from, 20_000), `no "${line.source}" in the agent's log`).not.toBeNull();
      await new Promise((r) => setTimeout(r, Math.floor(random() * point.pauseMs)));
      await agent.kill9();
      const answered = await pending;
      const left = await getProjectDeletion(db, id);
      outcomes.push(left === null ? 'whole' : left.state);
      const restartedAt = agent.output.length;
      await restart(id);
      if (left?.state === 'deleting') expect(await agent.logLine(new RegExp(`deleting ${id}: resumed at start`), restartedAt)).not.toBeNull();

      const deletion = await getProjectDeletion(db, id);
      if (deletion === null) {
        // Not committed: the project is whole and its recorded state is true.
        expect(answered.status, JSON.stringify(answered.body)).not.toBe(200);
        const project = await getProject(db, id);
        expect(project).not.toBeNull();
        const read = await call(api, 'GET', `/v0/projects/${id}`, token);
        expect(read.status).toBe(200);
        expect(read.body.state).toBe(project!.state);
        await wake(api, token, id);
        const rows = await v2(key, 'SELECT v FROM t');
        expect(rows.status, JSON.stringify(rows.body)).toBe(200);
        expect(rows.body.results[0].rows).toEqual([['kept']]);
        expect((await call(api, 'GET', `/v0/projects/${id}/storage/buckets?limit=1000`, token)).body.buckets).toHaveLength(150);
        // And it can be deleted after all.
        expect((await call(api, 'DELETE', `/v0/projects/${id}`, token)).status).toBe(200);
      } else {
        // Committed: gone everywhere at once, before the restarted agent has finished anything.
        expect((await call(api, 'GET', `/v0/projects/${id}`, token)).status).toBe(404);
        expect((await call(api, 'POST', `/v0/projects/${id}/wakeup`, token)).status).toBe(404);
        expect((await v2(key, 'SELECT 1')).status).toBe(401);
      }

      // Either way the deletion is finished now or shortly after the start: nothing of it is left.
      expect(await waitFor(async () => (await getProjectDeletion(db, id))?.state === 'deleted', 20_000, 50)).toBe(true);
      expect(await leftItems(id)).toEqual([]);
      expect(await lookupKey(db, keyId)).toBeNull();
      for (const path of [layout.tenantDir(id), layout.snapshotRoot(id), layout.logDir(id), join(root.dir, 'blobs', id), layout.runRecord(id)]) {
        expect(existsSync(path), path).toBe(false);
      }
      expect(processesWith('engine/main.ts', id)).toEqual([]);
      expect((await v2(key, 'SELECT 1')).status).toBe(401);
      const receipts = await call(api, 'GET', `/v0/receipts?project=${id}`, token);
      expect(receipts.status).toBe(200);
      expect(receipts.body.receipts.filter((r: any) => r.op === 'project.delete')).toHaveLength(1);
    }, 120_000);
  }

  it('left at least one deletion committed and unfinished for the next start to finish', () => {
    expect(outcomes).toContain('deleting');
  });
});

describe('the handler going away during a deletion', () => {
  it('changes nothing: the agent carries the deletion through to its end', async () => {
    // The cut must land after the commit is logged and before the answer; a deletion that finishes
    // between the two (its answer already back) did not exercise that, and is tried again.
    let cutShort = false;
    for (let attempt = 0; attempt < 5 && !cutShort; attempt++) {
      const { id, key, keyId } = await fullProject();
      const project = (await getProject(db, id))!;
      const [registered] = await listAgents(db);
      // The handler's internal call, cut as a killed handler's connection is, once the commit is logged.
      const from = agent.output.length;
      const cut = new AbortController();
      const call = fetch(`${registered!.internal_url}/internal/v1/projects/${id}/delete`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await issueInternalToken(agent.env.SVCD_INTERNAL_SECRET!)}`, 'content-type': 'application/json' },
        body: JSON.stringify({ recorded: { state: project.state, updated_at: project.updated_at }, actor: project.owner, request_id: 'req_00000000000000aa' }),
        signal: cut.signal,
      }).catch((err: Error) => err);
      expect(await agent.logLine(new RegExp(`deleting ${id}: marked deleting`), from, 20_000)).not.toBeNull();
      cut.abort();
      cutShort = (await call) instanceof Error;
      expect(await agent.logLine(new RegExp(`deleting ${id}: deleted`), from, 20_000)).not.toBeNull();
      expect((await getProjectDeletion(db, id))!.state).toBe('deleted');
      expect(await leftItems(id)).toEqual([]);
      expect(await lookupKey(db, keyId)).toBeNull();
      expect(existsSync(layout.tenantDir(id))).toBe(false);
      expect((await v2(key, 'SELECT 1')).status).toBe(401);
    }
    expect(cutShort).toBe(true);
  }, 300_000);
});
