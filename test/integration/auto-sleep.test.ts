/**
 * Automatic sleep and backups (docs/lifecycle.md "Automatic sleep and backups") through the public
 * API, the `/v2` listener and the real engine: `PATCH /v0/projects/{id}` with `auto_sleep_after_s`
 * and `backup` (answers, bounds, authorization), a tenant slept once idle past its setting and kept
 * awake by traffic, never woken, an automatic snapshot after a sleep that followed writes and none
 * after one that did not, copied off the machine, and the automatic snapshots past `keep` deleted
 * with receipts while manual ones stay; `svc projects update|get|list` set and show them.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as runCli } from '../../client/cli/program.ts';
import { serveFetch } from '../../shared/http/node-http.ts';
import { tempDir } from '../helpers/env.ts';
import { call, createProject, sleep, wake, waitFor } from '../helpers/lifecycle.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

/** The least auto_sleep_after_s this deployment takes (SVCD_AUTO_SLEEP_MIN_S). */
const MIN_S = 2;

let svc: TestService;
let token: string;
let other: string;
let pool: Pool;
const backups = tempDir('svc-backups-');
const events: { projectId: string; event: string }[] = [];

beforeAll(async () => {
  svc = await startTestService({ SVCD_AUTO_SLEEP_MIN_S: String(MIN_S), SVCD_BACKUP_DIR: backups.dir });
  token = (await signup(svc)).token;
  other = (await signup(svc)).token;
  pool = new Pool(svc.agent.dataplaneUrl, { connections: 4 });
  const hub = svc.agent.ctx.realtime;
  const original = hub.emitSystem.bind(hub);
  hub.emitSystem = (projectId, event, payload) => {
    events.push({ projectId, event });
    return original(projectId, event, payload);
  };
}, 60_000);

afterAll(async () => {
  await pool?.close();
  await svc?.stop();
  backups.cleanup();
});

/** A project with a key; left stopped. */
async function project(name: string): Promise<{ id: string; key: string }> {
  const id = await createProject(svc, token, name);
  const k = await call(svc, 'POST', `/v0/projects/${id}/keys`, token, {});
  expect(k.status).toBe(201);
  return { id, key: k.body.key };
}

/** One SQL statement through the `/v2` listener with the project's key. */
async function v2sql(key: string, sql: string): Promise<number> {
  const r = await pool.request({
    method: 'POST',
    path: '/v2/sql',
    headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
    body: JSON.stringify({ sql }),
  });
  await r.body.arrayBuffer();
  return r.statusCode;
}

async function patch(id: string, body: unknown, as = token) {
  return call(svc, 'PATCH', `/v0/projects/${id}`, as, body);
}

const stateOf = async (id: string) => (await call(svc, 'GET', `/v0/projects/${id}`, token)).body.state as string;
const snapshotsOf = async (id: string) => (await call(svc, 'GET', `/v0/projects/${id}/snapshots`, token)).body.snapshots as any[];
const automaticOf = async (id: string) => (await snapshotsOf(id)).filter((s) => s.automatic);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('PATCH /v0/projects/{id}: auto_sleep_after_s and backup', () => {
  it('are off by default, set, answered as GET and the list answer them, and cleared with null', async () => {
    const { id } = await project('settings');
    const fresh = await call(svc, 'GET', `/v0/projects/${id}`, token);
    expect(fresh.body).toMatchObject({ auto_sleep_after_s: null, backup: null, last_backup_at: null, last_backup_offsite: null });

    const set = await patch(id, { auto_sleep_after_s: 600, backup: { on_sleep: true, keep: 3 } });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body).toMatchObject({ id, name: 'settings', state: 'stopped', auto_sleep_after_s: 600, backup: { on_sleep: true, keep: 3 } });
    expect((await call(svc, 'GET', `/v0/projects/${id}`, token)).body).toEqual(set.body);
    const listed = await call(svc, 'GET', '/v0/projects?limit=1000', token);
    expect(listed.body.projects.find((p: any) => p.id === id)).toMatchObject({ auto_sleep_after_s: 600, backup: { on_sleep: true, keep: 3 } });

    // One field at a time leaves the others; keep defaults to 7.
    const renamed = await patch(id, { name: 'renamed' });
    expect(renamed.body).toMatchObject({ name: 'renamed', auto_sleep_after_s: 600, backup: { on_sleep: true, keep: 3 } });
    expect((await patch(id, { backup: { on_sleep: false } })).body).toMatchObject({ auto_sleep_after_s: 600, backup: { on_sleep: false, keep: 7 } });
    const cleared = await patch(id, { auto_sleep_after_s: null, backup: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({ name: 'renamed', auto_sleep_after_s: null, backup: null });
    expect((await call(svc, 'GET', `/v0/projects/${id}`, token)).body).toEqual(cleared.body);
  });

  it('refuse bad values with 400 naming the field, and change nothing', async () => {
    const { id } = await project('bounds');
    await patch(id, { auto_sleep_after_s: 600 });
    const bad: [unknown, RegExp][] = [
      [{}, /^name: /],
      [{ auto_sleep_after_s: MIN_S - 1 }, new RegExp(`^auto_sleep_after_s: must be at least ${MIN_S} seconds \\(SVCD_AUTO_SLEEP_MIN_S\\)`)],
      [{ auto_sleep_after_s: 0 }, /^auto_sleep_after_s: /],
      [{ auto_sleep_after_s: -5 }, /^auto_sleep_after_s: /],
      [{ auto_sleep_after_s: 90.5 }, /^auto_sleep_after_s: /],
      [{ auto_sleep_after_s: '600' }, /^auto_sleep_after_s: /],
      [{ auto_sleep_after_s: 30 * 24 * 3600 + 1 }, /^auto_sleep_after_s: /],
      [{ auto_sleep_after_s: true }, /^auto_sleep_after_s: /],
      [{ backup: true }, /^backup: /],
      [{ backup: {} }, /^backup\.on_sleep: /],
      [{ backup: { on_sleep: 'yes' } }, /^backup\.on_sleep: /],
      [{ backup: { on_sleep: true, keep: 0 } }, /^backup\.keep: /],
      [{ backup: { on_sleep: true, keep: 101 } }, /^backup\.keep: /],
      [{ backup: { on_sleep: true, keep: 2.5 } }, /^backup\.keep: /],
      [{ backup: { on_sleep: true, every: 3 } }, /^backup\.every: /],
      [{ name: 'ok', auto_sleep_after_s: 1 }, /^auto_sleep_after_s: /],
    ];
    for (const [body, message] of bad) {
      const r = await patch(id, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.code).toBe('invalid_request');
      expect(r.body.error.message, JSON.stringify(body)).toMatch(message);
    }
    expect((await call(svc, 'GET', `/v0/projects/${id}`, token)).body).toMatchObject({ name: 'bounds', auto_sleep_after_s: 600, backup: null });
  });

  it('are the owner\'s: 401 without a session or with a project key, 404 to another account', async () => {
    const { id, key } = await project('guarded');
    const body = { auto_sleep_after_s: 600, backup: { on_sleep: true, keep: 1 } };
    const anonymous = await call(svc, 'PATCH', `/v0/projects/${id}`, undefined as unknown as string, body);
    expect(anonymous.status).toBe(401);
    expect((await patch(id, body, key)).status).toBe(401);
    const stranger = await patch(id, body, other);
    expect([stranger.status, stranger.body.error.code]).toEqual([404, 'not_found']);
    expect((await patch('prj_ffffffffffffffff', body, other)).status).toBe(404);
    expect((await call(svc, 'GET', `/v0/projects/${id}`, token)).body).toMatchObject({ auto_sleep_after_s: null, backup: null });
  });
});

describe('automatic sleep', () => {
  it('sleeps a running tenant idle past its setting, through the sleep of the API, and never wakes it', async () => {
    const { id, key } = await project('idle');
    await wake(svc, token, id);
    expect(await v2sql(key, 'CREATE TABLE t (v TEXT)')).toBe(200);
    const lastTraffic = Date.now();
    expect((await patch(id, { auto_sleep_after_s: MIN_S })).status).toBe(200);
    expect(await waitFor(async () => (await stateOf(id)) === 'sleeping', 15_000, 100)).toBe(true);
    expect(Date.now() - lastTraffic).toBeGreaterThanOrEqual(MIN_S * 1000);
    expect(svc.agent.ctx.tenants.liveEndpoint(id)).toBeNull();
    expect(events).toContainEqual({ projectId: id, event: 'project.sleeping' });
    expect(svc.logs.some((l) => l.includes(`${id} slept after`) && l.includes('auto_sleep'))).toBe(true);
    // Nothing wakes it: /v2 answers 409, and it stays asleep.
    expect(await v2sql(key, 'SELECT 1')).toBe(409);
    await pause(MIN_S * 1000 + 1500);
    expect(await stateOf(id)).toBe('sleeping');
    // Without backup.on_sleep no snapshot is taken.
    expect(await snapshotsOf(id)).toEqual([]);
  }, 40_000);

  it('keeps a tenant with traffic awake, and sleeps it once the traffic stops', async () => {
    const { id, key } = await project('busy');
    await wake(svc, token, id);
    expect((await patch(id, { auto_sleep_after_s: MIN_S })).status).toBe(200);
    const until = Date.now() + MIN_S * 1000 * 2 + 1500;
    while (Date.now() < until) {
      expect(await v2sql(key, 'SELECT 1')).toBe(200);
      await pause(400);
    }
    expect(await stateOf(id)).toBe('running');
    expect(await waitFor(async () => (await stateOf(id)) === 'sleeping', 15_000, 100)).toBe(true);
  }, 40_000);

  it('leaves a tenant running once the setting is turned off', async () => {
    const { id } = await project('off');
    await wake(svc, token, id);
    expect((await patch(id, { auto_sleep_after_s: 3600 })).status).toBe(200);
    await pause(MIN_S * 1000 + 1500);
    expect(await stateOf(id)).toBe('running');
    expect((await patch(id, { auto_sleep_after_s: null })).status).toBe(200);
    await pause(MIN_S * 1000 + 1500);
    expect(await stateOf(id)).toBe('running');
    await sleep(svc, token, id);
  }, 30_000);
});

describe('automatic backups', () => {
  it('take a snapshot after an idle sleep that followed writes, copied off the machine, and none after one without writes', async () => {
    const { id, key } = await project('backed-up');
    await wake(svc, token, id);
    expect((await patch(id, { auto_sleep_after_s: MIN_S, backup: { on_sleep: true, keep: 3 } })).status).toBe(200);
    expect(await v2sql(key, 'CREATE TABLE t (v TEXT)')).toBe(200);
    expect(await v2sql(key, "INSERT INTO t VALUES ('a')")).toBe(200);
    const first = await waitFor(async () => (await automaticOf(id))[0], 20_000, 200);
    expect(first).toMatchObject({ label: 'auto', automatic: true, project: id, backup: { status: 'verified' } });
    expect(await stateOf(id)).toBe('sleeping');
    // Copied off the machine: the project shows the recovery point.
    const shown = await waitFor(async () => {
      const p = (await call(svc, 'GET', `/v0/projects/${id}`, token)).body;
      return p.last_backup_offsite === 'complete' ? p : null;
    }, 10_000, 100);
    expect(shown).toMatchObject({ last_backup_at: first.created_at, last_backup_offsite: 'complete' });
    expect(existsSync(join(backups.dir, id, first.id))).toBe(true);

    // Woken, read only, slept again by idleness: the data did not change, so no new snapshot.
    await wake(svc, token, id);
    expect(await v2sql(key, 'SELECT * FROM t')).toBe(200);
    expect(await waitFor(async () => (await stateOf(id)) === 'sleeping', 15_000, 100)).toBe(true);
    await pause(1000);
    expect((await automaticOf(id)).map((s) => s.id)).toEqual([first.id]);
  }, 60_000);

  it('keep the newest `keep` automatic snapshots: older ones deleted with receipts and their copies, manual ones kept; a wakeup right after a sleep waits for its backup', async () => {
    const { id, key } = await project('pruned');
    await wake(svc, token, id);
    expect(await v2sql(key, 'CREATE TABLE t (v TEXT)')).toBe(200);
    await sleep(svc, token, id);
    const manual = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, { label: 'mine' });
    expect(manual.status).toBe(201);
    expect(manual.body.automatic).toBe(false);
    expect((await patch(id, { backup: { on_sleep: true, keep: 2 } })).status).toBe(200);

    const taken: string[] = [];
    for (const v of ['a', 'b', 'c']) {
      await wake(svc, token, id);
      expect(await v2sql(key, `INSERT INTO t VALUES ('${v}')`)).toBe(200);
      // Any sleep, the API's too; the wakeup asked for at once finds the backup done.
      await sleep(svc, token, id);
      await wake(svc, token, id);
      const newest = (await automaticOf(id))[0];
      expect(newest && !taken.includes(newest.id), `automatic snapshot after writing ${v}`).toBe(true);
      taken.push(newest.id);
      await sleep(svc, token, id);
    }
    const kept = await waitFor(async () => {
      const auto = await automaticOf(id);
      return auto.length === 2 ? auto : null;
    }, 15_000, 100);
    expect(kept!.map((s) => s.id)).toEqual([taken[2], taken[1]]);
    expect((await snapshotsOf(id)).map((s) => s.id)).toContain(manual.body.id);
    const receipts = (await call(svc, 'GET', `/v0/projects/${id}/receipts`, token)).body.receipts as any[];
    expect(receipts.filter((r) => r.op === 'snapshot.delete')).toEqual([expect.objectContaining({ target: taken[0], actor: 'system', request_id: expect.stringMatching(/^req_[0-9a-f]{16}$/) })]);
    expect(existsSync(svc.agent.ctx.tenants.layout.backupDir(id, taken[0]!))).toBe(false);
    expect(await waitFor(() => !existsSync(join(backups.dir, id, taken[0]!)), 5000, 50)).toBe(true);
    expect(existsSync(join(backups.dir, id, taken[2]!))).toBe(true);
  }, 90_000);
});

describe('svc projects update|show|list', () => {
  it('set the settings and show them with the recovery point; refuse bad options before any request', async () => {
    const served = await serveFetch((request) => svc.app.fetch(request), { host: '127.0.0.1', port: 0 });
    const config = tempDir('svc-cli-config-');
    const cli = async (...argv: string[]) => {
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      const chunks: Buffer[] = [];
      stdout.on('data', (c: Buffer) => chunks.push(c));
      stderr.on('data', (c: Buffer) => chunks.push(c));
      const env = { SVC_BASE_URL: served.url, SVC_TOKEN: token, SVC_CONFIG_DIR: config.dir, NO_COLOR: '1' };
      const code = await runCli(argv, { stdin: Readable.from([]), stdout, stderr }, env);
      return { code, out: Buffer.concat(chunks).toString('utf8') };
    };
    try {
      const { id } = await project('cli');
      const set = await cli('projects', 'update', id, '--auto-sleep', '10m', '--backup-keep', '3', '--json');
      expect(set.code, set.out).toBe(0);
      expect(JSON.parse(set.out)).toMatchObject({ id, auto_sleep_after_s: 600, backup: { on_sleep: true, keep: 3 }, last_backup_at: null });
      const shown = await cli('projects', 'show', id);
      expect(shown.code, shown.out).toBe(0);
      expect(shown.out).toMatch(/auto_sleep\s+after 10m without \/v2 traffic/);
      expect(shown.out).toMatch(/backup\s+at each sleep that follows writes, newest 3 kept/);
      expect(shown.out).toMatch(/last_backup\s+none off the machine \(no snapshot\)/);
      const listed = await cli('projects', 'list');
      expect(listed.out.split('\n').find((l) => l.startsWith(id))).toMatch(/\b10m\s+keep 3\b/);
      for (const bad of [[], ['--auto-sleep', 'soon'], ['--backup', 'maybe'], ['--backup-keep', '0']]) {
        expect((await cli('projects', 'update', id, ...bad)).code, bad.join(' ')).toBe(2);
      }
      const below = await cli('projects', 'update', id, '--auto-sleep', '1s');
      expect([below.code, below.out]).toEqual([1, expect.stringMatching(/auto_sleep_after_s: must be at least 2 seconds/)]);
      const off = await cli('projects', 'update', id, '--auto-sleep', 'off', '--backup', 'off', '--json');
      expect(JSON.parse(off.out)).toMatchObject({ auto_sleep_after_s: null, backup: null });
    } finally {
      await served.close();
      config.cleanup();
    }
  }, 30_000);
});
