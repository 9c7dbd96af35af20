/**
 * Engine isolation (docs/lifecycle.md "Engine isolation"): a root agent runs every engine process as
 * `SVCD_ENGINE_UID`/`SVCD_ENGINE_GID` with no supplementary group, in a cgroup of its own with the
 * engine memory limit, CPU share and quota; the directories an engine writes are that user's with mode
 * 0700 (a data directory an older agent left as root's is repaired), the rest of the layout stays the
 * agent's; the group goes when the engine stops. Runs only where the agent can switch users (root).
 */
import { chmodSync, chownSync, existsSync, lstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CgroupHost } from '../../host-agent/sandbox/cgroups.ts';
import { call, createProject, engineSql, sleep, wake } from '../helpers/lifecycle.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

const ROOT = process.getuid?.() === 0;
const UID = 65531;
const GID = 65530;

let svc: TestService;
let token: string;

beforeAll(async () => {
  if (!ROOT) return;
  svc = await startTestService({ SVCD_ENGINE_UID: String(UID), SVCD_ENGINE_GID: String(GID), SVCD_ENGINE_MEMORY_MB: '256', SVCD_ENGINE_CPU_PERCENT: '50' });
  ({ token } = await signup(svc));
});

afterAll(async () => {
  await svc?.stop();
});

const tenants = () => svc.agent.ctx.tenants;
const layout = () => tenants().layout;

/** The pid of the project's running engine, from its pid record. */
function enginePid(id: string): number {
  return (JSON.parse(readFileSync(layout().runRecord(id), 'utf8')) as { pid: number }).pid;
}

/** A field of /proc/<pid>/status (`Uid`, `Gid`, `Groups`), split into its values. */
function status(pid: number, field: string): string[] {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(`${field}:`)) ?? '';
  return line.slice(field.length + 1).trim().split(/\s+/).filter(Boolean);
}

/** Every path under `dir` (itself included) whose owner is not `uid`. */
function notOwnedBy(dir: string, uid: number): string[] {
  const wrong: string[] = [];
  const walk = (path: string) => {
    if (lstatSync(path).uid !== uid) wrong.push(path);
    if (lstatSync(path).isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(dir);
  return wrong;
}

describe.skipIf(!ROOT)('engines of a root agent', () => {
  it('run as the engine user with no supplementary group, and own their data directory alone', async () => {
    const id = await createProject(svc, token, 'isolated');
    await wake(svc, token, id);
    const pid = enginePid(id);
    expect(status(pid, 'Uid')).toEqual([String(UID), String(UID), String(UID), String(UID)]);
    expect(status(pid, 'Gid')).toEqual([String(GID), String(GID), String(GID), String(GID)]);
    expect(status(pid, 'Groups')).toEqual([]);
    expect(status(pid, 'NoNewPrivs')).toEqual(['1']);
    // Every process of the engine (its executor included) runs as that user.
    const data = statSync(layout().dataDir(id));
    expect({ uid: data.uid, gid: data.gid, mode: data.mode & 0o7777 }).toEqual({ uid: UID, gid: GID, mode: 0o700 });
    // The agent's own directories stay the agent's.
    expect(statSync(layout().tenantDir(id)).uid).toBe(0);
    expect(statSync(layout().runRecord(id)).uid).toBe(0);
    expect(readdirSync(layout().tenantDir(id)).filter((n) => n.startsWith('initializing-'))).toEqual([]);
    // It can write its database, and nothing under data/ belongs to anyone else.
    const address = `127.0.0.1:${tenants().liveEndpoint(id)!.port}`;
    expect((await engineSql(address, 'CREATE TABLE t (v TEXT)')).status).toBe(200);
    expect((await engineSql(address, "INSERT INTO t VALUES ('a')")).status).toBe(200);
    await sleep(svc, token, id);
    expect(notOwnedBy(layout().dataDir(id), UID)).toEqual([]);
  });

  it('run their one-shot commands as the engine user too: offline head, snapshot and restore', async () => {
    const id = await createProject(svc, token, 'commands');
    await wake(svc, token, id);
    const address = `127.0.0.1:${tenants().liveEndpoint(id)!.port}`;
    await engineSql(address, 'CREATE TABLE t (v TEXT)');
    await engineSql(address, "INSERT INTO t VALUES ('before')");
    await sleep(svc, token, id);
    const head = await call(svc, 'GET', `/v0/projects/${id}/head`, token);
    expect(head.status, JSON.stringify(head.body)).toBe(200);
    const snap = await call(svc, 'POST', `/v0/projects/${id}/snapshots`, token, {});
    expect(snap.status, JSON.stringify(snap.body)).toBe(201);
    const root = statSync(layout().snapshotRoot(id));
    expect({ uid: root.uid, mode: root.mode & 0o7777 }).toEqual({ uid: UID, mode: 0o700 });
    expect(notOwnedBy(layout().snapshotRoot(id), UID)).toEqual([]);
    await wake(svc, token, id);
    await engineSql(address.replace(/:\d+$/, `:${tenants().liveEndpoint(id)!.port}`), "INSERT INTO t VALUES ('after')");
    await sleep(svc, token, id);
    const restored = await call(svc, 'POST', `/v0/projects/${id}/restore`, token, { snapshot_id: snap.body.id });
    expect(restored.status, JSON.stringify(restored.body)).toBe(200);
    // Built in a staging directory only the engine user could use, which is gone now.
    expect(readdirSync(layout().tenantDir(id)).filter((n) => n.startsWith('restoring-'))).toEqual([]);
    expect(notOwnedBy(layout().dataDir(id), UID)).toEqual([]);
    expect(statSync(layout().dataDir(id)).mode & 0o7777).toBe(0o700);
    await wake(svc, token, id);
    const read = await engineSql(`127.0.0.1:${tenants().liveEndpoint(id)!.port}`, 'SELECT v FROM t');
    expect(read.body.results[0].rows).toEqual([['before']]);
    await sleep(svc, token, id);
  });

  it('get a data directory an older agent left as root’s back at the next wakeup', async () => {
    const id = await createProject(svc, token, 'repaired');
    await wake(svc, token, id);
    await engineSql(`127.0.0.1:${tenants().liveEndpoint(id)!.port}`, 'CREATE TABLE t (v TEXT)');
    await sleep(svc, token, id);
    const chownAll = (path: string) => {
      chownSync(path, 0, 0);
      if (statSync(path).isDirectory()) for (const name of readdirSync(path)) chownAll(join(path, name));
    };
    chownAll(layout().dataDir(id));
    chmodSync(layout().dataDir(id), 0o755);
    expect(notOwnedBy(layout().dataDir(id), 0)).toEqual([]);
    await wake(svc, token, id);
    expect((await engineSql(`127.0.0.1:${tenants().liveEndpoint(id)!.port}`, "INSERT INTO t VALUES ('x')")).status).toBe(200);
    expect(notOwnedBy(layout().dataDir(id), UID)).toEqual([]);
    expect(statSync(layout().dataDir(id)).mode & 0o7777).toBe(0o700);
    await sleep(svc, token, id);
  });

  const cgroups = CgroupHost.detect();
  it.skipIf(typeof cgroups === 'string')(
    `run in a cgroup of their own with the engine limits, removed when they stop${typeof cgroups === 'string' ? ` (skipped: ${cgroups})` : ''}`,
    async () => {
      const id = await createProject(svc, token, 'bounded');
      await wake(svc, token, id);
      const pid = enginePid(id);
      const group = `svc-${svc.agent.ctx.agentId}/engine-${id}`;
      const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
      const memoryPath = lines.find((l) => /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:/.test(l) || l.startsWith('0::'))!.split(':')[2]!;
      expect(memoryPath.endsWith(`/${group}`)).toBe(true);
      const dirs = tenants().launch.cgroups!;
      const opened = dirs.open(group);
      expect(opened.processes()).toContain(pid);
      if (dirs.version === 1) {
        const mount = '/sys/fs/cgroup';
        expect(readFileSync(join(mount, 'memory', memoryPath, 'memory.limit_in_bytes'), 'utf8').trim()).toBe(String(256 * 1024 * 1024));
        const cpuPath = lines.find((l) => /^\d+:(?:[^:]*,)?cpu(?:,[^:]*)?:/.test(l))!.split(':')[2]!;
        expect(cpuPath.endsWith(`/${group}`)).toBe(true);
        expect(readFileSync(join(mount, 'cpu', cpuPath, 'cpu.shares'), 'utf8').trim()).toBe('1024');
        expect(readFileSync(join(mount, 'cpu', cpuPath, 'cpu.cfs_quota_us'), 'utf8').trim()).toBe('50000');
        expect(readFileSync(join(mount, 'cpu', cpuPath, 'cpu.cfs_period_us'), 'utf8').trim()).toBe('100000');
      } else {
        const dir = join('/sys/fs/cgroup', memoryPath);
        expect(readFileSync(join(dir, 'memory.max'), 'utf8').trim()).toBe(String(256 * 1024 * 1024));
        expect(readFileSync(join(dir, 'cpu.max'), 'utf8').trim()).toBe('50000 100000');
      }
      await sleep(svc, token, id);
      expect(opened.processes()).toEqual([]);
      const memoryDir = dirs.version === 1 ? join('/sys/fs/cgroup/memory', memoryPath) : join('/sys/fs/cgroup', memoryPath);
      expect(existsSync(memoryDir)).toBe(false);
    },
  );
});
