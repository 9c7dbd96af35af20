/**
 * The tenant lifecycle through the public HTTP API against the real engine (docs/lifecycle.md): every row of
 * the project state table, contract rules 1–3, head, snapshots and restore.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getProject } from '../../shared/db/projects.ts';
import { snapshotSchema } from '../../shared/schemas/snapshots.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { call, createProject, engineSql, pidAlive, sleep, wake, waitFor } from '../helpers/lifecycle.ts';
import { decodeEnvelope } from '../helpers/envelope.ts';

let svc: TestService;
let token: string;
const events: { projectId: string; event: string; payload: any }[] = [];

beforeAll(async () => {
  svc = await startTestService();
  ({ token } = await signup(svc));
  const hub = svc.agent.ctx.realtime;
  const original = hub.emitSystem.bind(hub);
  hub.emitSystem = (projectId, event, payload) => {
    events.push({ projectId, event, payload });
    return original(projectId, event, payload);
  };
});

afterAll(async () => {
  await svc?.stop();
});

const tenants = () => svc.agent.ctx.tenants;
const runRecord = (id: string) => JSON.parse(readFileSync(tenants().layout.runRecord(id), 'utf8')) as { pid: number; port: number };

describe('project states', () => {
  it('a new project is stopped and has no data directory', async () => {
    const id = await createProject(svc, token);
    const got = await call(svc, 'GET', `/v0/projects/${id}`, token);
    expect(got.status).toBe(200);
    expect(got.body.state).toBe('stopped');
    expect(existsSync(tenants().layout.dataDir(id))).toBe(false);
    expect(tenants().liveEndpoint(id)).toBeNull();
  });

  it('wakeup from stopped initializes the data directory and answers running with the pin', async () => {
    const id = await createProject(svc, token);
    const body = await wake(svc, token, id);
    expect(body).toMatchObject({ id, state: 'running', native: { pin: '3.0.0', data_plane: '/v2' } });
    expect(existsSync(join(tenants().layout.dataDir(id), 'meta.json'))).toBe(true);
    const endpoint = tenants().liveEndpoint(id);
    expect(endpoint).not.toBeNull();
    const probe = await fetch(`http://${endpoint!.host}:${endpoint!.port}/v2/capabilities`, { headers: { 'x-svc-protocol-minor': '3' } });
    expect(probe.status).toBe(200);
    expect((await call(svc, 'GET', `/v0/projects/${id}`, token)).body.state).toBe('running');
    expect((await getProject(svc.db, id))!.state).toBe('running');
    expect(events).toContainEqual(expect.objectContaining({ projectId: id, event: 'project.running' }));
  });

  it('wakeup of a running project is idempotent: the same engine keeps serving', async () => {
    const id = await createProject(svc, token);
    await wake(svc, token, id);
    const first = runRecord(id);
    await wake(svc, token, id);
    expect(runRecord(id)).toEqual(first);
    expect(tenants().liveEndpoint(id)).toEqual({ host: '127.0.0.1', port: first.port });
  });

  it('sleep stops the engine gracefully and keeps the data directory; sleeping again is idempotent', async () => {
    const id = await createProject(svc, token);
    await wake(svc, token, id);
    const { pid } = runRecord(id);
    const slept = await sleep(svc, token, id);
    expect(slept.native).toEqual({ pin: '3.0.0', data_plane: '/v2' });
    expect(pidAlive(pid)).toBe(false);
    expect(tenants().liveEndpoint(id)).toBeNull();
    expect(existsSync(tenants().layout.runRecord(id))).toBe(false);
    expect(existsSync(join(tenants().layout.dataDir(id), 'meta.json'))).toBe(true);
    // Graceful: the engine's own stop line is in the tenant log (SIGTERM, checkpoint, lock released).
    expect(readFileSync(tenants().logs.path(id), 'utf8')).toMatch(/stopped on SIGTERM/);
    const again = await sleep(svc, token, id);
    expect(again.updated_at).toBe(slept.updated_at);
    expect((await getProject(svc.db, id))!.state).toBe('sleeping');
    expect(events).toContainEqual(expect.objectContaining({ projectId: id, event: 'project.sleeping' }));
  });

  it('sleep of a never-started project answers sleeping and starts nothing', async () => {
    const id = await createProject(svc, token);
    await sleep(svc, token, id);
    expect(existsSync(tenants().layout.dataDir(id))).toBe(false);
    expect(tenants().liveEndpoint(id)).toBeNull();
  });

  it('wakeup from sleeping serves the same data directory again', async () => {
    const id = await createProject(svc, token);
    await wake(svc, token, id);
    const address = () => `127.0.0.1:${tenants().liveEndpoint(id)!.port}`;
    expect((await engineSql(address(), 'CREATE TABLE t (v TEXT)')).status).toBe(200);
    expect((await engineSql(address(), "INSERT INTO t VALUES ('kept')")).status).toBe(200);
    await sleep(svc, token, id);
    await wake(svc, token, id);
    const read = await engineSql(address(), 'SELECT v FROM t');
    expect(read.body.results[0].rows).toEqual([['kept']]);
  });

  it('an engine killed behind the agent’s back is recorded sleeping by the agent at once, and GET answers it', async () => {
    const id = await createProject(svc, token);
    await wake(svc, token, id);
    const key = (await call(svc, 'POST', `/v0/projects/${id}/keys`, token, {})).body.key as string;
    const v2 = () =>
      fetch(`${svc.agent.dataplaneUrl}/v2/capabilities`, { headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3' } });
    expect((await v2()).status).toBe(200);
    const { pid } = runRecord(id);
    const exits: string[] = [];
    const unsubscribe = tenants().onExit((projectId) => exits.push(projectId));
    process.kill(pid, 'SIGKILL');
    // The supervisor notices the exit at once: /v2 can answer tenant_not_running without a hang.
    expect(await waitFor(() => tenants().liveEndpoint(id) === null, 2000)).toBe(true);
    expect(exits).toEqual([id]);
    unsubscribe();
    const started = Date.now();
    const after = await v2();
    expect(after.status).toBe(409);
    expect(((await after.json()) as any).error.code).toBe('tenant_not_running');
    expect(Date.now() - started).toBeLessThan(1000);
    // No GET needed: the agent keeps the record true itself (docs/lifecycle.md "Reconciliation").
    const recorded = await waitFor(async () => ((await getProject(svc.db, id))!.state === 'sleeping' ? getProject(svc.db, id) : null), 2000);
    expect(recorded).toMatchObject({ state: 'sleeping', state_kept: true });
    const got = await call(svc, 'GET', `/v0/projects/${id}`, token);
    expect(got.body.state).toBe('sleeping');
    // And the engine can be woken again over its (intact) data directory.
    await wake(svc, token, id);
  });

  it('GET reconciles a recorded running state with no process and no directory to stopped', async () => {
    const id = await createProject(svc, token);
    const before = (await getProject(svc.db, id))!;
    const { setProjectState } = await import('../../shared/db/projects.ts');
    // Written behind the agent's back: unmarked, so GET asks the agent, which writes the truth kept.
    await setProjectState(svc.db, id, 'stopped', 'running', before.updated_at);
    expect((await getProject(svc.db, id))!.state_kept).toBeUndefined();
    expect((await call(svc, 'GET', `/v0/projects/${id}`, token)).body.state).toBe('stopped');
    expect(await getProject(svc.db, id)).toMatchObject({ state: 'stopped', state_kept: true });
  });

  it('GET answers a record its agent keeps without asking the agent; an unmarked one is asked once and marked', async () => {
    const id = await createProject(svc, token);
    await wake(svc, token, id);
    const tenantsNow = tenants();
    const original = tenantsNow.reconcile.bind(tenantsNow);
    let asked = 0;
    tenantsNow.reconcile = (projectId, recorded) => {
      asked++;
      return original(projectId, recorded);
    };
    try {
      // The wakeup marks its running state kept beside its answer.
      await waitFor(async () => (await getProject(svc.db, id))!.state_kept === true, 2000);
      for (let i = 0; i < 3; i++) expect((await call(svc, 'GET', `/v0/projects/${id}`, token)).body.state).toBe('running');
      expect(asked).toBe(0);
      // A record without the mark (an older one, or written by anything but its agent) is reconciled once.
      const { keys } = await import('../../shared/db/table.ts');
      const { UpdateCommand } = await import('@aws-sdk/lib-dynamodb');
      await svc.db.doc.send(new UpdateCommand({ TableName: svc.db.table, Key: keys.project(id), UpdateExpression: 'REMOVE state_kept' }));
      for (let i = 0; i < 3; i++) expect((await call(svc, 'GET', `/v0/projects/${id}`, token)).body.state).toBe('running');
      expect(asked).toBe(1);
      expect((await getProject(svc.db, id))!.state_kept).toBe(true);
    } finally {
      tenantsNow.reconcile = original;
    }
  });

  it('the data plane answers 409 tenant_not_running promptly for a sleeping project and never wakes it', async () => {
    const id = await createProject(svc, token);
    await wake(svc, token, id);
    await sleep(svc, token, id);
    const key = await call(svc, 'POST', `/v0/projects/${id}/keys`, token, { label: 'lifecycle' });
    expect(key.status).toBe(201);
    const started = Date.now();
    const r = await fetch(`${svc.agent.dataplaneUrl}/v2/capabilities`, {
      method: 'GET',
      headers: { authorization: `Bearer ${key.body.key}`, 'x-svc-protocol-minor': '3' },
    });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(r.status).toBe(409);
    expect(((await r.json()) as any).error.code).toBe('tenant_not_running');
    expect(tenants().liveEndpoint(id)).toBeNull();
    expect((await getProject(svc.db, id))!.state).toBe('sleeping');
  });
});

describe('placement', () => {
  it('a project whose agent stopped heartbeating answers 503 orchestrator_unavailable, never another agent', async () => {
    const id = await createProject(svc, token);
    const { heartbeatAgent } = await import('../../shared/db/agents.ts');
    const agentId = svc.agent.ctx.agentId;
    try {
      for (const [method, path] of [['GET', ''], ['POST', '/wakeup'], ['GET', '/head']] as const) {
        // Written right before each call, so the agent's own heartbeat cannot land in between.
        await heartbeatAgent(svc.db, agentId, new Date(Date.now() - 3_600_000).toISOString(), true);
        const r = await call(svc, method, `/v0/projects/${id}${path}`, token);
        expect(r.status, `${method} ${path}`).toBe(503);
        expect(r.body.error.code).toBe('orchestrator_unavailable');
      }
    } finally {
      await heartbeatAgent(svc.db, agentId, new Date().toISOString(), true);
    }
    expect((await call(svc, 'GET', `/v0/projects/${id}`, token)).status).toBe(200);
  });
});

describe('head', () => {
  it('answers 409 tenant_not_running for a never-started tenant', async () => {
    const id = await createProject(svc, token);
    const r = await call(svc, 'GET', `/v0/projects/${id}/head`, token);
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe('tenant_not_running');
  });

  it('probes a running engine live: protocol minor, request id, capabilities verbatim', async () => {
    const id = await createProject(svc, token);
    await wake(svc, token, id);
    const r = await call(svc, 'GET', `/v0/projects/${id}/head`, token);
    expect(r.status).toBe(200);
    const port = tenants().liveEndpoint(id)!.port;
    expect(r.body).toMatchObject({
      state: 'running',
      source: 'live_probe',
      protocol_minor: 3,
      engine: { engine_version: '3.0.0', protocol_minor: 3 },
      endpoint: { data_plane: '/v2', address: `127.0.0.1:${port}` },
      capabilities: { content_type: 'application/vnd.svc.product-v1' },
    });
    expect(r.body.request_id).toMatch(/^req_[0-9a-f]{16}$/);
    expect(r.body.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    const caps = decodeEnvelope(Buffer.from(r.body.capabilities.body_base64, 'base64'));
    expect(caps.engine_version).toBe('3.0.0');
    expect(r.body).not.toHaveProperty('lineage');
  });

  it('reports the offline status of a sleeping engine with the newest snapshot, without waking it', async () => {
    const id = await createProject(svc, token);
    await wake(svc, token, id);
    await sleep(svc, token, id);
    let r = await call(svc, 'GET', `/v0/projects/${id}/head`, token);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ state: 'sleeping', source: 'offline_status', endpoint: { data_plane: '/v2' }, engine: { engine_version: '3.0.0' } });
    expect(Object.keys(r.body.lineage).sort()).toEqual(['catalog_version', 'directory_lineage', 'logical_time_micros', 'root_digest', 'visible_csn']);
    expect(r.body).not.toHaveProperty('latest_snapshot');
    expect(r.body).not.toHaveProperty('protocol_minor');
    const a = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, {});
    const b = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, {});
    r = await call(svc, 'GET', `/v0/projects/${id}/head`, token);
    expect(r.body.latest_snapshot).toBe(b.body.id);
    expect(a.body.id < b.body.id).toBe(true);
    expect(tenants().liveEndpoint(id)).toBeNull();
  });
});

describe('snapshots', () => {
  it('answer 409 tenant_not_running for a never-started tenant and 409 tenant_running while awake', async () => {
    const id = await createProject(svc, token);
    let r = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, {});
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe('tenant_not_running');
    await wake(svc, token, id);
    r = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, { label: 'x' });
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe('tenant_running');
  });

  it('record exactly the contract’s Snapshot fields, every figure copied from the engine', async () => {
    const id = await createProject(svc, token);
    await wake(svc, token, id);
    const address = `127.0.0.1:${tenants().liveEndpoint(id)!.port}`;
    await engineSql(address, 'CREATE TABLE t (v INTEGER)');
    await engineSql(address, 'INSERT INTO t VALUES (1)');
    await sleep(svc, token, id);
    const head = await call(svc, 'GET', `/v0/projects/${id}/head`, token);
    const r = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, { label: 'before migration' });
    expect(r.status).toBe(201);
    const s = r.body;
    expect(Object.keys(s).sort()).toEqual(Object.keys(snapshotSchema.shape).sort());
    expect(s.id).toMatch(/^snap_[0-9a-f]{16}$/);
    expect(s).toMatchObject({ project: id, label: 'before migration', engine_version: '3.0.0', source_data_dir: tenants().layout.dataDir(id) });
    expect(s.backup_dir).toBe(tenants().layout.backupDir(id, s.id));
    expect(s.lineage).toEqual(head.body.lineage);
    expect(Object.keys(s.backup).sort()).toEqual(['backup_path', 'checkpoint_digest', 'file_count', 'status', 'total_bytes', 'visible_csn']);
    expect(s.backup).toMatchObject({ backup_path: s.backup_dir, status: 'verified', visible_csn: s.lineage.visible_csn });
    // The engine says checkpoint_digest is the digest of the checkpointed file status digests.
    expect(s.backup.checkpoint_digest).toBe(s.lineage.root_digest);
    expect(existsSync(join(s.backup_dir, 'manifest.json'))).toBe(true);
    expect(events).toContainEqual(expect.objectContaining({ projectId: id, event: 'snapshot.created' }));
  });

  it('refuse a label over 64 characters and a malformed body', async () => {
    const id = await createProject(svc, token);
    let r = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, { label: 'x'.repeat(65) });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(/label/);
    r = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, { label: 5 });
    expect(r.status).toBe(400);
    r = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, { nope: true });
    expect(r.status).toBe(400);
  });

  it('are listed newest first with pagination, and read one by one', async () => {
    const id = await createProject(svc, token);
    await wake(svc, token, id);
    await sleep(svc, token, id);
    const ids: string[] = [];
    for (const label of ['a', null, 'c']) {
      const r = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, label === null ? undefined : { label });
      expect(r.status).toBe(201);
      ids.push(r.body.id);
    }
    const page1 = await call(svc, 'GET', `/v0/projects/${id}/snapshots?limit=2`, token);
    expect(page1.body.snapshots.map((s: any) => s.id)).toEqual([ids[2], ids[1]]);
    expect(page1.body.snapshots[1].label).toBeNull();
    expect(page1.body.next_cursor).toEqual(expect.any(String));
    const page2 = await call(svc, 'GET', `/v0/projects/${id}/snapshots?limit=2&cursor=${page1.body.next_cursor}`, token);
    expect(page2.body.snapshots.map((s: any) => s.id)).toEqual([ids[0]]);
    const one = await call(svc, 'GET', `/v0/projects/${id}/snapshots/${ids[0]}`, token);
    expect(one.status).toBe(200);
    expect(one.body).toEqual(page2.body.snapshots[0]);
    expect((await call(svc, 'GET', `/v0/projects/${id}/snapshots/snap_0000000000000000`, token)).status).toBe(404);
    expect((await call(svc, 'GET', `/v0/projects/${id}/snapshots/nope`, token)).status).toBe(400);
  });

  it('of another owner’s project are 404', async () => {
    const id = await createProject(svc, token);
    const other = await signup(svc);
    expect((await call(svc, 'POST', `/v0/projects/${id}/snapshots`, other.token, {})).status).toBe(404);
    expect((await call(svc, 'GET', `/v0/projects/${id}/snapshots`, other.token)).status).toBe(404);
    expect((await call(svc, 'POST', `/v0/projects/${id}/restore`, other.token, { snapshot_id: 'snap_0000000000000000' })).status).toBe(404);
    expect((await call(svc, 'POST', `/v0/projects/${id}/wakeup`, other.token)).status).toBe(404);
  });
});

describe('restore', () => {
  it('puts the data back: write, snapshot, write, restore, read', async () => {
    const id = await createProject(svc, token);
    await wake(svc, token, id);
    const address = () => `127.0.0.1:${tenants().liveEndpoint(id)!.port}`;
    await engineSql(address(), 'CREATE TABLE notes (body TEXT)');
    await engineSql(address(), "INSERT INTO notes VALUES ('first')");
    await sleep(svc, token, id);
    const snap = (await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, { label: 'first' })).body;
    await wake(svc, token, id);
    await engineSql(address(), "INSERT INTO notes VALUES ('second')");
    await sleep(svc, token, id);
    const before = (await call(svc, 'GET', `/v0/projects/${id}/head`, token)).body.lineage;

    const r = await call(svc, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snap.id });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.state).toBe('sleeping');
    expect(r.body.restored_at).toMatch(/Z$/);
    expect(r.body.native.restore.status).toBe('restored');
    expect(r.body.native.backup).toEqual(snap.backup);
    // The previous directory is retained under replaced/ with the state it had.
    const replaced = r.body.replaced_dir as string;
    expect(replaced.startsWith(tenants().layout.replacedRoot(id))).toBe(true);
    expect(readdirSync(tenants().layout.replacedRoot(id))).toHaveLength(1);
    expect(existsSync(join(replaced, 'meta.json'))).toBe(true);
    expect(tenants().liveEndpoint(id)).toBeNull();
    expect((await getProject(svc.db, id))!.state).toBe('sleeping');

    const after = (await call(svc, 'GET', `/v0/projects/${id}/head`, token)).body.lineage;
    expect(after.visible_csn).toBe(snap.lineage.visible_csn);
    expect(after.visible_csn).toBeLessThan(before.visible_csn);
    expect(after.directory_lineage).toBe(before.directory_lineage);
    await wake(svc, token, id);
    const read = await engineSql(address(), 'SELECT body FROM notes ORDER BY rowid');
    expect(read.body.results[0].rows).toEqual([['first']]);
    expect(events).toContainEqual(expect.objectContaining({ projectId: id, event: 'project.restored' }));
  });

  it('answers 409 tenant_running while awake, 404 for an unknown snapshot, 400 for a malformed id', async () => {
    const id = await createProject(svc, token);
    await wake(svc, token, id);
    await sleep(svc, token, id);
    const snap = (await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, {})).body;
    await wake(svc, token, id);
    let r = await call(svc, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snap.id });
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe('tenant_running');
    expect(tenants().liveEndpoint(id)).not.toBeNull();
    await sleep(svc, token, id);
    r = await call(svc, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: 'snap_ffffffffffffffff' });
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe('not_found');
    r = await call(svc, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: 'snap_x' });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(/snapshot_id/);
    r = await call(svc, 'POST', `/v0/projects/${id}/restore`, token, {});
    expect(r.status).toBe(400);
    // Another project's snapshot is unknown here.
    const other = await createProject(svc, token);
    r = await call(svc, 'POST', `/v0/projects/${other}/restore`, token, { snapshot_id: snap.id });
    expect(r.status).toBe(404);
  });

  it('twice in a row keeps every previous directory', async () => {
    const id = await createProject(svc, token);
    await wake(svc, token, id);
    await sleep(svc, token, id);
    const snap = (await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, {})).body;
    expect((await call(svc, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snap.id })).status).toBe(200);
    expect((await call(svc, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snap.id })).status).toBe(200);
    expect(readdirSync(tenants().layout.replacedRoot(id))).toHaveLength(2);
    expect(existsSync(tenants().layout.restoreJournal(id))).toBe(false);
  });
});

describe('serialisation', () => {
  it('concurrent wakeups of one project start one engine', async () => {
    const id = await createProject(svc, token);
    const answers = await Promise.all([1, 2, 3, 4].map(() => call(svc, 'POST', `/v0/projects/${id}/wakeup`, token)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    const { pid } = runRecord(id);
    const logged = readFileSync(tenants().logs.path(id), 'utf8').match(/engine serving on/g) ?? [];
    expect(logged).toHaveLength(1);
    expect(pidAlive(pid)).toBe(true);
  });

  it('interleaved wakeups and sleeps of one project end in a true state', async () => {
    const id = await createProject(svc, token);
    const ops = ['wakeup', 'sleep', 'wakeup', 'sleep', 'wakeup'];
    const answers = await Promise.all(ops.map((op) => call(svc, 'POST', `/v0/projects/${id}/${op}`, token)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    const got = await call(svc, 'GET', `/v0/projects/${id}`, token);
    expect(got.body.state).toBe(tenants().liveEndpoint(id) ? 'running' : 'sleeping');
    expect((await getProject(svc.db, id))!.state).toBe(got.body.state);
  });
});
