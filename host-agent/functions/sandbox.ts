/**
 * The OS layer around a project's function runtime (docs/functions.md "Isolation"). workerd's V8
 * isolates give a function no file system, no sockets and no processes; this layer is what makes a
 * runtime escape land nowhere:
 *
 * - **Namespaces**, made by a root agent with util-linux `unshare`: mount, PID, network, IPC and UTS.
 *   The network namespace has no interface but a loopback that is down, so nothing of the host's
 *   network (its loopback listeners, private ranges, a metadata endpoint) exists for the runtime;
 *   its only ways out are the unix sockets the agent serves in `out/` (the module control socket and
 *   the egress filter, ./egress.ts).
 * - **A root of its own**: a small tmpfs holding the workerd binary, the shared libraries, four
 *   device nodes, a fresh /proc of its own PID namespace and three directories bound in: `cfg/` (its
 *   configuration, read-only), `in/` (where it listens), `out/` (the agent's sockets). `pivot_root`
 *   then detaches the host's root, so no path leads back to it.
 * - **An unprivileged user per project**: `setpriv` switches to the project's uid and gid
 *   (`uidOf`), drops every capability and supplementary group and sets no_new_privs before workerd
 *   starts; the kernel kills it when its parent goes (`--pdeathsig`).
 * - **A cgroup** (../sandbox/cgroups.ts) with the runtime's memory, CPU and task limits, entered
 *   before the first instruction.
 *
 * `SVCD_FUNCTION_SANDBOX=none` runs workerd without this layer (never without the isolates): a
 * development setting for a host that cannot provide it, warned about at every start.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { systemTool } from '../sandbox/system-tools.ts';

/** The sandboxes a deployment can choose (`SVCD_FUNCTION_SANDBOX`). */
export type SandboxMode = 'os' | 'none';

/** The first uid (and gid) of the range function runtimes run as: far from system and login users. */
export const RUNTIME_UID_BASE = 0x4000_0000;
/** How many uids the range holds. */
export const RUNTIME_UID_SPAN = 0x3fff_0000;

/** The uid (and gid) the runtimes of `projectId` run as: derived from the id, the same on every agent. */
export function uidOf(projectId: string): number {
  const hash = createHash('sha256').update(projectId).digest();
  return RUNTIME_UID_BASE + (hash.readUInt32BE(0) % RUNTIME_UID_SPAN);
}

/** The directories of one runtime, as the host sees them. */
export interface RuntimeDirs {
  /** An empty directory the runtime's root is mounted on. */
  root: string;
  /** Its configuration and the supervisor (bound read-only at /cfg). */
  cfg: string;
  /** Where it listens (its user's; bound at /in). */
  in: string;
  /** The agent's sockets for it (bound at /out). */
  out: string;
}

/**
 * Sets up the runtime's root and starts workerd in it. Arguments: the new root, the workerd binary,
 * setpriv, umount, the cfg/in/out directories, the uid, the gid, then workerd's own arguments. Values
 * are positional parameters, never part of the script's text.
 */
const SETUP = `set -eu
new=$1 workerd=$2 setpriv=$3 umount=$4 cfg=$5 in=$6 out=$7 uid=$8 gid=$9
shift 9
mount --make-rprivate /
mount -t tmpfs -o size=1m,mode=0755,nosuid,nodev svc-fn "$new"
cd "$new"
mkdir -p bin dev proc cfg in out old usr
for d in /lib /lib32 /lib64 /libx32 /usr/lib /usr/lib32 /usr/lib64 /usr/libx32; do
  if [ -L "$d" ]; then ln -s "$(readlink "$d")" ".$d"
  elif [ -d "$d" ]; then mkdir -p ".$d"; mount --bind "$d" ".$d"; mount -o remount,bind,ro,nosuid,nodev ".$d"
  fi
done
file() { touch "$2"; mount --bind "$1" "$2"; mount -o remount,bind,ro,nosuid,nodev "$2"; }
file "$workerd" bin/workerd
file "$setpriv" bin/setpriv
file "$umount" bin/umount
for d in null zero random urandom; do touch "dev/$d"; mount --bind "/dev/$d" "dev/$d"; done
mount --bind "$cfg" cfg; mount -o remount,bind,ro,nosuid,nodev,noexec cfg
mount --bind "$in" in; mount -o remount,bind,nosuid,nodev,noexec in
mount --bind "$out" out; mount -o remount,bind,nosuid,nodev,noexec out
mount -t proc -o nosuid,nodev,noexec proc proc
pivot_root . old
cd /
/bin/umount -l /old
unset OLDPWD PWD
exec /bin/setpriv --reuid="$uid" --regid="$gid" --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all --pdeathsig=KILL -- /bin/workerd "$@"`;

/** The system tools the OS layer needs, at absolute paths. */
export interface SandboxTools {
  unshare: string;
  setpriv: string;
  umount: string;
  sh: string;
}

/** The tools, or what is missing. */
export function sandboxTools(): SandboxTools | string {
  const found = { unshare: systemTool('unshare'), setpriv: systemTool('setpriv'), umount: systemTool('umount'), sh: existsSync('/bin/sh') ? '/bin/sh' : null };
  const missing = Object.entries(found).filter(([, path]) => path === null).map(([name]) => name);
  if (missing.length > 0) return `the OS sandbox needs util-linux ${missing.join(', ')}, which ${missing.length === 1 ? 'is' : 'are'} not installed`;
  return found as SandboxTools;
}

/** How workerd is started inside the OS layer (or, with `none`, as it is). */
export interface LaunchSpec {
  mode: SandboxMode;
  workerd: string;
  tools: SandboxTools | null;
  dirs: RuntimeDirs;
  uid: number;
  /** workerd's own arguments, with paths as the runtime sees them. */
  args: string[];
}

/**
 * The argv of a runtime: with `os`, parent-death signal for the namespace holder, `unshare` into new
 * mount, PID, network, IPC and UTS namespaces, the setup script, workerd as the project's user.
 */
export function launchArgv(spec: LaunchSpec): string[] {
  if (spec.mode === 'none') return [spec.workerd, ...spec.args];
  const t = spec.tools!;
  const { dirs } = spec;
  return [
    t.setpriv,
    '--pdeathsig=KILL',
    '--',
    t.unshare,
    '--mount',
    '--pid',
    '--net',
    '--ipc',
    '--uts',
    '--fork',
    '--kill-child',
    '--',
    t.sh,
    '-c',
    SETUP,
    'svc-fn-sandbox',
    dirs.root,
    spec.workerd,
    t.setpriv,
    t.umount,
    dirs.cfg,
    dirs.in,
    dirs.out,
    String(spec.uid),
    String(spec.uid),
    ...spec.args,
  ];
}

/** Where a runtime sees its directories. */
export function insidePaths(mode: SandboxMode, dirs: RuntimeDirs): { cfg: string; in: string; out: string } {
  return mode === 'os' ? { cfg: '/cfg', in: '/in', out: '/out' } : { cfg: dirs.cfg, in: dirs.in, out: dirs.out };
}

/** Runs `argv` (a probe): null when it exited 0 and printed what `expect` accepts, else what went wrong. */
export function runProbe(argv: string[], expect: (stdout: string) => boolean, timeoutMs = 15_000): Promise<string | null> {
  return new Promise((resolve) => {
    const [command, ...args] = argv;
    const child = spawn(command!, args, { env: {}, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-2000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(e.code ?? e.message);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0 && expect(out)) resolve(null);
      else {
        const last = err.trim().split('\n').filter(Boolean).slice(-1)[0];
        resolve(`${signal ? `signal ${signal}` : `exit code ${code}`}${last ? `: ${last}` : ''}`);
      }
    });
  });
}
