/**
 * Control groups (./cgroups.ts): the file-writing logic against fake v1 and v2 trees in a temp
 * directory, the entering shell as a real process, and on this machine a real memory limit that
 * kills a process allocating past it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sharesToWeight } from './cgroup-files.ts';
import { CgroupHost } from './cgroups.ts';

const temps: string[] = [];
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

function temp(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-cgroups-'));
  temps.push(dir);
  return dir;
}

/** A fake v1 mount: one directory per controller with the files detection looks for. */
function fakeV1(own = '/'): { root: string; self: string } {
  const root = temp();
  const files: Record<string, string[]> = {
    memory: ['memory.limit_in_bytes', 'memory.memsw.limit_in_bytes', 'cgroup.procs'],
    cpu: ['cpu.shares', 'cpu.cfs_quota_us', 'cpu.cfs_period_us', 'cgroup.procs'],
    pids: ['cgroup.procs'],
  };
  for (const [controller, names] of Object.entries(files)) {
    for (const dir of new Set([join(root, controller), join(root, controller, controller === 'memory' ? own : '')])) {
      mkdirSync(dir, { recursive: true });
      for (const name of names) writeFileSync(join(dir, name), '');
    }
  }
  const self = `9:name=systemd:/\n8:pids:/\n4:memory:${own}\n2:cpuacct:/\n1:cpu:/\n0::/\n`;
  return { root, self };
}

/** A fake v2 mount whose root offers memory, cpu and pids. */
function fakeV2(): { root: string; self: string } {
  const root = temp();
  writeFileSync(join(root, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
  writeFileSync(join(root, 'cgroup.subtree_control'), '');
  writeFileSync(join(root, 'cgroup.procs'), '1\n');
  return { root, self: '0::/\n' };
}

const read = (path: string) => readFileSync(path, 'utf8');

describe('detection', () => {
  it('needs root', () => {
    const { root, self } = fakeV1();
    expect(CgroupHost.detect({ root, selfCgroup: self, privileged: false })).toMatch(/not root/);
  });

  it('names what is missing', () => {
    const root = temp();
    expect(CgroupHost.detect({ root, selfCgroup: '0::/\n', privileged: true })).toMatch(/no cgroup memory controller is mounted/);
    const v2 = temp();
    writeFileSync(join(v2, 'cgroup.controllers'), 'pids\n');
    expect(CgroupHost.detect({ root: v2, selfCgroup: '0::/\n', privileged: true })).toMatch(/has no memory controller/);
  });

  it('finds v1 below the process’s own groups, and v2 by its cgroup.controllers', () => {
    const v1 = fakeV1('/process_api/abc');
    const host1 = CgroupHost.detect({ root: v1.root, selfCgroup: v1.self, privileged: true });
    expect(host1).toBeInstanceOf(CgroupHost);
    expect((host1 as CgroupHost).version).toBe(1);
    expect((host1 as CgroupHost).describe()).toContain(join(v1.root, 'memory', 'process_api/abc'));
    const v2 = fakeV2();
    const host2 = CgroupHost.detect({ root: v2.root, selfCgroup: v2.self, privileged: true });
    expect((host2 as CgroupHost).version).toBe(2);
  });
});

describe('cgroup v1 (fake tree)', () => {
  it('writes every limit into its controller’s group, below the own memory group', () => {
    const { root, self } = fakeV1('/process_api/abc');
    const host = CgroupHost.detect({ root, selfCgroup: self, privileged: true }) as CgroupHost;
    const group = host.create('svc-agt_1/engine-prj_1', { memoryBytes: 64 * 1024 * 1024, cpuShares: 1024, cpuQuotaPercent: 150, pidsMax: 32 });
    expect(group.name).toBe('svc-agt_1/engine-prj_1');
    const mem = join(root, 'memory/process_api/abc/svc-agt_1/engine-prj_1');
    const cpu = join(root, 'cpu/svc-agt_1/engine-prj_1');
    const pids = join(root, 'pids/svc-agt_1/engine-prj_1');
    expect(read(join(mem, 'memory.limit_in_bytes'))).toBe(String(64 * 1024 * 1024));
    expect(read(join(cpu, 'cpu.shares'))).toBe('1024');
    expect(read(join(cpu, 'cpu.cfs_period_us'))).toBe('100000');
    expect(read(join(cpu, 'cpu.cfs_quota_us'))).toBe('150000');
    expect(read(join(pids, 'pids.max'))).toBe('32');
  });

  it('keeps memory+swap equal to memory, in the order the kernel accepts', () => {
    const { root, self } = fakeV1();
    const host = CgroupHost.detect({ root, selfCgroup: self, privileged: true }) as CgroupHost;
    const dir = join(root, 'memory/g');
    mkdirSync(dir);
    writeFileSync(join(dir, 'memory.limit_in_bytes'), '9223372036854771712');
    writeFileSync(join(dir, 'memory.memsw.limit_in_bytes'), '9223372036854771712');
    host.create('g', { memoryBytes: 1000 });
    expect(read(join(dir, 'memory.limit_in_bytes'))).toBe('1000');
    expect(read(join(dir, 'memory.memsw.limit_in_bytes'))).toBe('1000');
    // Re-applied without limits: unlimited again (-1), idempotently.
    host.create('g', {});
    expect(read(join(dir, 'memory.limit_in_bytes'))).toBe('-1');
    expect(read(join(dir, 'memory.memsw.limit_in_bytes'))).toBe('-1');
    expect(read(join(root, 'cpu/g/cpu.cfs_quota_us'))).toBe('-1');
    expect(read(join(root, 'pids/g/pids.max'))).toBe('max');
  });

  it('refuses names that could leave the base', () => {
    const { root, self } = fakeV1();
    const host = CgroupHost.detect({ root, selfCgroup: self, privileged: true }) as CgroupHost;
    for (const name of ['../x', 'a/../../b', '/abs', 'a//b', 'a b', '', '.', 'a/..']) {
      expect(() => host.create(name, {}), name).toThrow(/invalid cgroup name/);
    }
  });

  it('reads the OOM kill count, removes quietly, and sweeps empty leftovers only', () => {
    const { root, self } = fakeV1();
    const host = CgroupHost.detect({ root, selfCgroup: self, privileged: true }) as CgroupHost;
    const group = host.create('svc-agt_2/engine-a', {});
    const oom = join(root, 'memory/svc-agt_2/engine-a/memory.oom_control');
    writeFileSync(oom, 'oom_kill_disable 0\nunder_oom 0\noom_kill 0\n');
    expect(group.oomKilled()).toBe(false);
    writeFileSync(oom, 'oom_kill_disable 0\nunder_oom 0\noom_kill 1\n');
    expect(group.oomKilled()).toBe(true);
    // A fake directory holds regular files: rmdir fails, and remove() says nothing.
    expect(() => group.remove()).not.toThrow();
    // Empty leftovers of this agent go; a group with a process stays; other agents' are not looked at.
    mkdirSync(join(root, 'memory/svc-agt_2/empty/deeper'), { recursive: true });
    mkdirSync(join(root, 'memory/svc-agt_2/busy'), { recursive: true });
    writeFileSync(join(root, 'memory/svc-agt_2/busy/cgroup.procs'), '4242\n');
    mkdirSync(join(root, 'memory/svc-agt_3/empty'), { recursive: true });
    host.sweep('svc-agt_2');
    expect(existsSync(join(root, 'memory/svc-agt_2/empty'))).toBe(false);
    expect(existsSync(join(root, 'memory/svc-agt_2/busy'))).toBe(true);
    expect(existsSync(join(root, 'memory/svc-agt_3/empty'))).toBe(true);
    expect(() => host.sweep('../escape')).not.toThrow();
  });
});

describe('cgroup v2 (fake tree)', () => {
  it('hands the controllers down and writes the unified files', () => {
    const { root, self } = fakeV2();
    const host = CgroupHost.detect({ root, selfCgroup: self, privileged: true }) as CgroupHost;
    expect(read(join(root, 'cgroup.subtree_control'))).toBe('+memory +cpu +pids');
    // The fake kernel: a new group offers what its parent hands down.
    mkdirSync(join(root, 'svc-agt_1'));
    writeFileSync(join(root, 'svc-agt_1/cgroup.controllers'), 'cpu memory pids');
    writeFileSync(join(root, 'svc-agt_1/cgroup.subtree_control'), '');
    mkdirSync(join(root, 'svc-agt_1/engine-p'));
    writeFileSync(join(root, 'svc-agt_1/engine-p/memory.swap.max'), 'max');
    writeFileSync(join(root, 'svc-agt_1/engine-p/pids.max'), 'max');
    host.create('svc-agt_1/engine-p', { memoryBytes: 1 << 30, cpuShares: 1024, cpuQuotaPercent: 100, pidsMax: 64 });
    const dir = join(root, 'svc-agt_1/engine-p');
    expect(read(join(root, 'svc-agt_1/cgroup.subtree_control'))).toBe('+memory +cpu +pids');
    expect(read(join(dir, 'memory.max'))).toBe(String(1 << 30));
    expect(read(join(dir, 'memory.swap.max'))).toBe('0');
    expect(read(join(dir, 'cpu.weight'))).toBe('100');
    expect(read(join(dir, 'cpu.max'))).toBe('100000 100000');
    expect(read(join(dir, 'pids.max'))).toBe('64');
    host.create('svc-agt_1/engine-p', {});
    expect(read(join(dir, 'memory.max'))).toBe('max');
    expect(read(join(dir, 'cpu.max'))).toBe('max 100000');
    writeFileSync(join(dir, 'memory.events'), 'low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n');
    expect(host.open('svc-agt_1/engine-p').oomKilled()).toBe(true);
  });

  it('scales v1 shares to v2 weights', () => {
    expect(sharesToWeight(1024)).toBe(100);
    expect(sharesToWeight(2)).toBe(1);
    expect(sharesToWeight(10 * 1024 * 1024)).toBe(10000);
  });

  it('refuses a base that was given no controllers', () => {
    const { root } = fakeV2();
    mkdirSync(join(root, 'service'));
    writeFileSync(join(root, 'service/cgroup.controllers'), '');
    expect(CgroupHost.detect({ root, selfCgroup: '0::/service\n', privileged: true })).toMatch(/was given no memory controller/);
  });
});

describe('wrap', () => {
  it('enters every group before exec, passing paths and arguments as data', () => {
    const { root, self } = fakeV1();
    const host = CgroupHost.detect({ root, selfCgroup: self, privileged: true }) as CgroupHost;
    const group = host.create('svc-agt_w/engine-x', {});
    const hostile = ['$(touch /tmp/svc-pwned)', '; echo no', '"quoted" \'single\'', '*', ''];
    const argv = host.wrap(group, ['/bin/sh', '-c', 'echo $$; for a; do printf "[%s]" "$a"; done', 'sh', ...hostile]);
    const run = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
    expect(run.status).toBe(0);
    const [pid, args] = run.stdout.split('\n');
    expect(args).toBe(hostile.map((a) => `[${a}]`).join(''));
    expect(existsSync('/tmp/svc-pwned')).toBe(false);
    for (const controller of ['memory', 'cpu', 'pids']) {
      expect(read(join(root, controller, 'svc-agt_w/engine-x/cgroup.procs')).trim()).toBe(pid);
    }
  });

  it('refuses to run the command when a group cannot be entered', () => {
    const { root, self } = fakeV1();
    const host = CgroupHost.detect({ root, selfCgroup: self, privileged: true }) as CgroupHost;
    const group = host.create('svc-agt_w/gone', {});
    rmSync(join(root, 'cpu/svc-agt_w/gone'), { recursive: true });
    const argv = host.wrap(group, ['/bin/echo', 'ran']);
    const run = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
    expect(run.status).toBe(125);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/cannot enter the cgroup/);
  });
});

describe('this machine', () => {
  const host = CgroupHost.detect();
  const why = typeof host === 'string' ? host : null;

  it.skipIf(why !== null)(`kills a process that allocates 200 MiB in a 64 MiB group${why ? ` (skipped: ${why})` : ''}`, async () => {
    const cgroups = host as CgroupHost;
    const name = `svc-test-${process.pid}-${Date.now()}/oom`;
    const group = cgroups.create(name, { memoryBytes: 64 * 1024 * 1024, cpuShares: 1024, pidsMax: 64 });
    try {
      const program = 'const kept = []; for (let i = 0; i < 200; i++) kept.push(Buffer.alloc(1 << 20, 1)); console.log("survived", kept.length);';
      const argv = cgroups.wrap(group, [process.execPath, '-e', program]);
      const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
      const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('exit', (c, s) => resolve([c, s])));
      expect(out).not.toContain('survived');
      expect({ code, signal }).toEqual({ code: null, signal: 'SIGKILL' });
      expect(group.oomKilled()).toBe(true);
      expect(group.processes()).toEqual([]);
    } finally {
      group.remove();
      cgroups.sweep(name.split('/')[0]);
    }
    expect(group.processes()).toEqual([]);
  });

  it.skipIf(why !== null)('kills what is left in a group, then removes it', async () => {
    const cgroups = host as CgroupHost;
    const prefix = `svc-test-${process.pid}-${Date.now()}`;
    const group = cgroups.create(`${prefix}/left`, { memoryBytes: 256 * 1024 * 1024 });
    const argv = cgroups.wrap(group, ['/bin/sleep', '60']);
    const child = spawn(argv[0]!, argv.slice(1), { stdio: 'ignore' });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_c, s) => resolve(s)));
    for (let i = 0; i < 50 && group.processes().length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(group.processes()).toEqual([child.pid]);
    group.kill();
    expect(await exited).toBe('SIGKILL');
    group.remove();
    cgroups.sweep(prefix);
    expect(cgroups.describe()).toMatch(/cgroup v[12]/);
  });
});
