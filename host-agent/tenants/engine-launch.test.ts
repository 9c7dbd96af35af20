/**
 * How engines are started (./engine-launch.ts): as the engine user through setpriv when the agent is
 * root, as the agent's user (one warning) when it is not, inside the project's cgroup with the engine
 * limits when the host has cgroups (a warning naming why when it has none).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../shared/config.ts';
import { CgroupHost } from '../sandbox/cgroups.ts';
import { EngineLaunch } from './engine-launch.ts';
import { layoutOf } from './layout.ts';

const secrets = { SVCD_SESSION_SECRET: 'a'.repeat(32), SVCD_KEY_PEPPER: 'b'.repeat(32), SVCD_INTERNAL_SECRET: 'c'.repeat(32) };
const settings = loadSettings({ ...secrets, SVCD_ENGINE_UID: '4321', SVCD_ENGINE_GID: '4322', SVCD_ENGINE_MEMORY_MB: '512', SVCD_ENGINE_CPU_PERCENT: '150' });
const BIN = '/opt/svc/bin/svc-engine';
const temps: string[] = [];
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

function temp(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-launch-'));
  temps.push(dir);
  return dir;
}

/** A fake cgroup v1 tree detected as this host's. */
function fakeCgroups(): { root: string; host: CgroupHost } {
  const root = temp();
  for (const [controller, probe] of [['memory', 'memory.limit_in_bytes'], ['cpu', 'cpu.shares'], ['pids', 'cgroup.procs']] as const) {
    mkdirSync(join(root, controller));
    writeFileSync(join(root, controller, probe), '');
  }
  const host = CgroupHost.detect({ root, selfCgroup: '4:memory:/\n1:cpu:/\n8:pids:/\n', privileged: true });
  if (typeof host === 'string') throw new Error(host);
  return { root, host };
}

describe('engine launch', () => {
  it('when the agent is not root: engines run as the agent’s user, said once as a warning', () => {
    const lines: string[] = [];
    const launch = new EngineLaunch({ settings, agentId: 'agt_0123456789abcdef', engineBin: BIN, log: (l) => lines.push(l), root: false, cgroups: 'the agent is not root' });
    expect(launch.user).toBeNull();
    expect(launch.cgroups).toBeNull();
    expect(launch.command(['status', '--data-dir', '/d', '--json'], 'prj_0123456789abcdef')).toEqual({ argv: [BIN, 'status', '--data-dir', '/d', '--json'], group: null });
    expect(lines.filter((l) => /warning: engines run as the agent's own user/.test(l))).toHaveLength(1);
    expect(lines.filter((l) => /warning: engines run without cgroups .*: the agent is not root/.test(l))).toHaveLength(1);
  });

  it('when the agent is root: every engine command is switched to the engine user, with no group kept', () => {
    const lines: string[] = [];
    const launch = new EngineLaunch({ settings, agentId: 'agt_0123456789abcdef', engineBin: BIN, log: (l) => lines.push(l), root: true, cgroups: 'none here', setpriv: '/usr/bin/setpriv' });
    expect(launch.user).toEqual({ uid: 4321, gid: 4322 });
    expect(launch.command(['version', '--json'], null).argv).toEqual([
      '/usr/bin/setpriv',
      '--reuid=4321',
      '--regid=4322',
      '--clear-groups',
      '--no-new-privs',
      '--',
      BIN,
      'version',
      '--json',
    ]);
    expect(lines.some((l) => /own user/.test(l))).toBe(false);
  });

  it('a root agent without setpriv starts no engine at all rather than one as root', () => {
    const lines: string[] = [];
    const launch = new EngineLaunch({ settings, agentId: 'agt_0123456789abcdef', engineBin: BIN, log: (l) => lines.push(l), root: true, cgroups: 'none', setpriv: null });
    expect(launch.problem).toMatch(/setpriv is not installed/);
    expect(() => launch.command(['version', '--json'], null)).toThrow(/setpriv/);
    expect(lines.some((l) => /tenants cannot run on this host/.test(l))).toBe(true);
  });

  it('puts each project’s engine in its own group with the engine limits, entered before the user switch', () => {
    const { root, host } = fakeCgroups();
    const launch = new EngineLaunch({ settings, agentId: 'agt_0123456789abcdef', engineBin: BIN, log: () => {}, root: true, cgroups: host, setpriv: '/usr/bin/setpriv' });
    const { argv, group } = launch.command(['serve', '--data-dir', '/d'], 'prj_0123456789abcdef');
    expect(group!.name).toBe('svc-agt_0123456789abcdef/engine-prj_0123456789abcdef');
    expect(argv.slice(0, 2)).toEqual(['/bin/sh', '-c']);
    expect(argv.indexOf('/usr/bin/setpriv')).toBeGreaterThan(argv.indexOf(join(root, 'memory', group!.name, 'cgroup.procs')));
    expect(argv.slice(-4)).toEqual([BIN, 'serve', '--data-dir', '/d']);
    const dir = (controller: string) => join(root, controller, group!.name);
    expect(readFileSync(join(dir('memory'), 'memory.limit_in_bytes'), 'utf8')).toBe(String(512 * 1024 * 1024));
    expect(readFileSync(join(dir('cpu'), 'cpu.shares'), 'utf8')).toBe('1024');
    expect(readFileSync(join(dir('cpu'), 'cpu.cfs_quota_us'), 'utf8')).toBe('150000');
    expect(readFileSync(join(dir('pids'), 'pids.max'), 'utf8')).toBe('256');
    // The pin check's version runs in no group.
    expect(launch.command(['version', '--json'], null).group).toBeNull();
  });

  it.skipIf(process.getuid?.() !== 0)('gives the engine user its directories, mode 0700, and leaves the agent’s own alone', () => {
    const launch = new EngineLaunch({ settings, agentId: 'agt_0123456789abcdef', engineBin: BIN, log: () => {}, root: true, cgroups: 'none', setpriv: '/usr/bin/setpriv' });
    const layout = layoutOf(temp());
    for (const dir of [layout.tenants, layout.snapshots]) mkdirSync(dir, { recursive: true });
    launch.prepareLayout(layout);
    expect(statSync(layout.root).mode & 0o001).toBe(0o001);
    expect(statSync(layout.compileCache).uid).toBe(4321);
    const p = 'prj_0123456789abcdef';
    mkdirSync(join(layout.dataDir(p), 'inner'), { recursive: true });
    writeFileSync(join(layout.dataDir(p), 'inner', 'file'), 'x');
    launch.prepareProject(layout, p);
    for (const path of [layout.dataDir(p), join(layout.dataDir(p), 'inner'), join(layout.dataDir(p), 'inner', 'file')]) {
      expect(statSync(path).uid).toBe(4321);
      expect(statSync(path).gid).toBe(4322);
    }
    expect(statSync(layout.dataDir(p)).mode & 0o7777).toBe(0o700);
    expect(statSync(layout.tenantDir(p)).uid).toBe(0);
    launch.privateDir(join(layout.tenantDir(p), 'initializing-x'));
    expect(statSync(join(layout.tenantDir(p), 'initializing-x')).uid).toBe(4321);
    expect(statSync(join(layout.tenantDir(p), 'initializing-x')).mode & 0o7777).toBe(0o700);
  });

  it.skipIf(process.getuid?.() !== 0)('refuses every engine, saying why, when the engine user cannot reach the root', () => {
    const lines: string[] = [];
    const launch = new EngineLaunch({ settings, agentId: 'agt_0123456789abcdef', engineBin: BIN, log: (l) => lines.push(l), root: true, cgroups: 'none', setpriv: '/usr/bin/setpriv' });
    const closed = temp();
    const layout = layoutOf(join(closed, 'agent'));
    for (const dir of [layout.tenants, layout.snapshots]) mkdirSync(dir, { recursive: true });
    expect(statSync(closed).mode & 0o777).toBe(0o700);
    launch.prepareLayout(layout);
    expect(launch.problem).toContain(`${closed} is not searchable`);
    expect(() => launch.command(['status'], 'prj_0123456789abcdef')).toThrow(/cannot reach/);
    expect(lines.some((l) => l.includes('tenants cannot run on this host'))).toBe(true);
    // The agent does not open a directory above its root: that is the deployer's.
    expect(statSync(closed).mode & 0o777).toBe(0o700);
  });
});
