/**
 * The OS layer's pure parts (./sandbox.ts): the uid of a project's runtimes, the argv that starts
 * workerd inside the layer (or without it), and where a runtime sees its directories. The layer
 * itself is tested for real through test/integration/functions-runtime.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { insidePaths, launchArgv, RUNTIME_UID_BASE, RUNTIME_UID_SPAN, uidOf } from './sandbox.ts';

const dirs = { root: '/srv/fn/r/root', cfg: '/srv/fn/r/cfg', in: '/srv/fn/r/in', out: '/srv/fn/r/out' };
const tools = { unshare: '/usr/bin/unshare', setpriv: '/usr/bin/setpriv', umount: '/usr/bin/umount', sh: '/bin/sh' };

describe('uidOf', () => {
  it('gives each project a uid of the runtime range, the same on every agent', () => {
    const ids = Array.from({ length: 200 }, (_, i) => `prj_${i.toString(16).padStart(16, '0')}`);
    const uids = ids.map(uidOf);
    for (const uid of uids) {
      expect(uid).toBeGreaterThanOrEqual(RUNTIME_UID_BASE);
      expect(uid).toBeLessThan(RUNTIME_UID_BASE + RUNTIME_UID_SPAN);
      expect(Number.isInteger(uid)).toBe(true);
    }
    expect(ids.map(uidOf)).toEqual(uids);
    expect(new Set(uids).size).toBe(ids.length);
    // Far from system and login users, and below the ids that mean "none" (65534, 4294967295).
    expect(RUNTIME_UID_BASE).toBe(0x4000_0000);
    expect(RUNTIME_UID_BASE + RUNTIME_UID_SPAN).toBeLessThan(0xffff_ffff);
  });
});

describe('launchArgv', () => {
  it('without the layer, is workerd and its arguments', () => {
    expect(launchArgv({ mode: 'none', workerd: '/opt/workerd', tools: null, dirs, uid: 0x40000001, args: ['serve', '/srv/fn/r/cfg/config.capnp'] })).toEqual([
      '/opt/workerd',
      'serve',
      '/srv/fn/r/cfg/config.capnp',
    ]);
  });

  it('with the layer, enters new mount, PID, network, IPC and UTS namespaces under a parent-death signal, every value a positional argument of a fixed script', () => {
    const argv = launchArgv({ mode: 'os', workerd: '/opt/workerd', tools, dirs, uid: 0x40000001, args: ['serve', '--experimental', '/cfg/config.capnp'] });
    expect(argv.slice(0, 12)).toEqual(['/usr/bin/setpriv', '--pdeathsig=KILL', '--', '/usr/bin/unshare', '--mount', '--pid', '--net', '--ipc', '--uts', '--fork', '--kill-child', '--']);
    expect(argv.slice(12, 14)).toEqual(['/bin/sh', '-c']);
    const script = argv[14]!;
    expect(argv.slice(15)).toEqual([
      'svc-fn-sandbox',
      dirs.root,
      '/opt/workerd',
      tools.setpriv,
      tools.umount,
      dirs.cfg,
      dirs.in,
      dirs.out,
      '1073741825',
      '1073741825',
      'serve',
      '--experimental',
      '/cfg/config.capnp',
    ]);
    // The script names no value: a path or uid never becomes shell text.
    for (const value of [dirs.root, dirs.cfg, '/opt/workerd', '1073741825']) expect(script).not.toContain(value);
    const again = launchArgv({ mode: 'os', workerd: '/x/"; rm -rf /', tools, dirs: { ...dirs, root: '/tmp/$(id)' }, uid: 0x40000002, args: [] });
    expect(again[14]).toBe(script);
    // What the script does, in order: a private tmpfs root, pivot_root, the host's root detached, then workerd as the project's user without privileges.
    const steps = ['mount --make-rprivate /', 'mount -t tmpfs', 'mount -t proc', 'pivot_root . old', '/bin/umount -l /old', 'exec /bin/setpriv'];
    const at = steps.map((s) => script.indexOf(s));
    expect(at.every((i) => i >= 0)).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    for (const flag of ['--reuid="$uid"', '--regid="$gid"', '--clear-groups', '--no-new-privs', '--inh-caps=-all', '--bounding-set=-all', '--pdeathsig=KILL']) expect(script).toContain(flag);
    expect(script).toMatch(/mount --bind "\$cfg" cfg; mount -o remount,bind,ro,/);
  });
});

describe('insidePaths', () => {
  it('is the fixed mount points with the layer, the host directories without it', () => {
    expect(insidePaths('os', dirs)).toEqual({ cfg: '/cfg', in: '/in', out: '/out' });
    expect(insidePaths('none', dirs)).toEqual({ cfg: dirs.cfg, in: dirs.in, out: dirs.out });
  });
});
