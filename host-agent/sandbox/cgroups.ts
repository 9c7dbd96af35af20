/**
 * Control groups for the processes this agent starts (docs/lifecycle.md "Engine isolation"): one group
 * per process that must be bounded, with a memory limit, a CPU share and quota, and a task limit.
 * Engines use it; function runtimes may too. Both hierarchies are supported and chosen by detection:
 *
 * - cgroup v1 (one mount per controller under `<root>/memory`, `<root>/cpu`, `<root>/pids`):
 *   `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes` to the same value where swap
 *   accounting exists, so swap cannot stretch the limit), `cpu.shares`, `cpu.cfs_quota_us` over
 *   `cpu.cfs_period_us`, `pids.max`;
 * - cgroup v2 (one unified mount at `<root>`): `memory.max` (and `memory.swap.max` 0), `cpu.weight`
 *   (the v1 share scaled so 1024 is v2's default 100), `cpu.max`, `pids.max`.
 *
 * Groups are made below the agent's own group of each hierarchy (read from /proc/self/cgroup), so
 * whatever bounds the agent bounds its engines too, and nothing escapes its service's accounting. A
 * process enters its group before it runs: `wrap()` gives an argv whose shell writes its own pid
 * into each group's `cgroup.procs` and then execs the real command (argv only, nothing interpolated).
 */
import { accessSync, constants, existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { applyV1, applyV2, enableControllers, readPids, readQuietly, removeEmptyTree, type CgroupLimits, type Controller } from './cgroup-files.ts';

export type { CgroupLimits } from './cgroup-files.ts';

/** One group of this agent. */
export interface Cgroup {
  readonly name: string;
  /** True once the OOM killer killed a process of this group (v1 `memory.oom_control`, v2 `memory.events`). */
  oomKilled(): boolean;
  /** Pids in the group now (empty when it is gone). */
  processes(): number[];
  /** SIGKILLs every process left in the group (a straggler of an exited engine); never throws. */
  kill(): void;
  /** Removes the group when it is empty; never throws (a group that still holds a process stays). */
  remove(): void;
}

/** Options of {@link CgroupHost.detect}. */
export interface DetectOptions {
  /** Where the hierarchies are mounted (default `/sys/fs/cgroup`). */
  root?: string;
  /**
   * The group, inside each hierarchy, under which groups are made (default: this process's own group
   * of that hierarchy, from /proc/self/cgroup). `/` is the hierarchy's root.
   */
  prefix?: string;
  /** The text of /proc/self/cgroup (tests). */
  selfCgroup?: string;
  /** Whether the process may manage groups: default, it runs as root. */
  privileged?: boolean;
  /** This process's pid (tests): v2 moves it into a leaf when its own group must hand out controllers. */
  pid?: number;
}

const V1_CONTROLLERS: Controller[] = ['memory', 'cpu', 'pids'];
/** A group name: segments of letters, digits, `_`, `.`, `-` separated by `/`, none of them `.` or `..`. */
const NAME = /^(?!.*(?:^|\/)\.{1,2}(?:\/|$))[A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)*$/;

/**
 * The shell that enters the groups: `sh -c SCRIPT svc-cgroup N file1 … fileN command args…`.
 * Every value is a positional parameter, quoted where used: nothing of a path or an argument is ever
 * parsed as shell text. `$$` is the shell's pid, which the exec'd command keeps.
 */
const ENTER_SCRIPT = [
  'n=$1; shift',
  'while [ "$n" -gt 0 ]; do',
  '  echo $$ > "$1" || { echo "svc: cannot enter the cgroup of $1" >&2; exit 125; }',
  '  shift; n=$((n - 1))',
  'done',
  'exec "$@"',
].join('\n');

/** The groups of this host, v1 or v2. */
export class CgroupHost {
  readonly version: 1 | 2;
  /** v1: each controller's base directory; v2: the one base directory under `memory` (all the same). */
  readonly #bases: Map<Controller, string>;

  private constructor(version: 1 | 2, bases: Map<Controller, string>) {
    this.version = version;
    this.#bases = bases;
  }

  /**
   * The host's groups, or why they cannot be had (a sentence for the agent's log): not root, no
   * hierarchy mounted, the memory or cpu controller missing, a base directory that cannot be written.
   * `pids` is used where present.
   */
  static detect(options: DetectOptions = {}): CgroupHost | string {
    const root = options.root ?? '/sys/fs/cgroup';
    const privileged = options.privileged ?? process.getuid?.() === 0;
    if (!privileged) return `the agent is not root (uid ${process.getuid?.() ?? '?'}), so it cannot create cgroups`;
    let self: string;
    try {
      self = options.selfCgroup ?? readFileSync('/proc/self/cgroup', 'utf8');
    } catch {
      return 'this host has no /proc/self/cgroup (not Linux?)';
    }
    if (existsSync(join(root, 'cgroup.controllers'))) return detectV2(root, self, options);
    return detectV1(root, self, options.prefix);
  }

  /** @internal */
  static of(version: 1 | 2, bases: Map<Controller, string>): CgroupHost {
    return new CgroupHost(version, bases);
  }

  /** Where groups are made, for logs: one directory per controller on v1, one on v2. */
  describe(): string {
    return this.version === 2 ? `cgroup v2 under ${this.#bases.get('memory')}` : `cgroup v1 under ${[...new Set(this.#bases.values())].join(', ')}`;
  }

  /**
   * Makes the group `name` (such as `svc-<agent id>/engine-<project>`) and sets its limits; when it
   * exists its limits are set again. Throws when the kernel refuses (the caller decides what a
   * process may do without its group).
   */
  create(name: string, limits: CgroupLimits): Cgroup {
    const dirs = this.#dirs(name);
    if (this.version === 2) {
      const base = this.#bases.get('memory')!;
      const segments = name.split('/');
      // Every group between the base and the new one hands the controllers on to its children.
      let dir = base;
      for (const segment of segments) {
        enableControllers(dir);
        dir = join(dir, segment);
        mkdirSync(dir, { recursive: true });
      }
      applyV2(dir, limits);
    } else {
      for (const [controller, dir] of dirs) {
        mkdirSync(dir, { recursive: true });
        applyV1(controller, dir, limits);
      }
    }
    return this.#group(name, dirs);
  }

  /** The group `name` as it is (made before, by this agent or a previous one), without touching its limits. */
  open(name: string): Cgroup {
    return this.#group(name, this.#dirs(name));
  }

  /**
   * An argv that runs `argv` inside `cgroup`: `/bin/sh` writes its own pid into each hierarchy's
   * `cgroup.procs` and execs the command, so the command is bounded from its first instruction
   * (exit 125 and a line on stderr when the group cannot be entered).
   */
  wrap(cgroup: Cgroup, argv: string[]): string[] {
    if (argv.length === 0) throw new Error('wrap: no command');
    const files = [...new Set(this.#dirs(cgroup.name).values())].map((dir) => join(dir, 'cgroup.procs'));
    return ['/bin/sh', '-c', ENTER_SCRIPT, 'svc-cgroup', String(files.length), ...files, ...argv];
  }

  /**
   * Removes the empty groups at and below `prefix` (such as `svc-<agent id>`), deepest first: what a
   * previous run of this agent left. Groups that still hold a process (an engine about to be adopted)
   * stay. Never throws.
   */
  sweep(prefix?: string): void {
    for (const base of new Set(this.#bases.values())) {
      const top = prefix === undefined ? base : NAME.test(prefix) ? join(base, prefix) : null;
      if (top === null) continue;
      removeEmptyTree(top, prefix !== undefined);
    }
  }

  /** The directory of `name` in each hierarchy (one shared directory on v2). */
  #dirs(name: string): Map<Controller, string> {
    if (!NAME.test(name)) throw new Error(`invalid cgroup name ${JSON.stringify(name)}`);
    const dirs = new Map<Controller, string>();
    for (const [controller, base] of this.#bases) dirs.set(controller, join(base, name));
    return dirs;
  }

  #group(name: string, dirs: Map<Controller, string>): Cgroup {
    const unique = [...new Set(dirs.values())];
    const memory = dirs.get('memory')!;
    const version = this.version;
    return {
      name,
      oomKilled() {
        const file = version === 2 ? join(memory, 'memory.events') : join(memory, 'memory.oom_control');
        const text = readQuietly(file);
        const match = text === null ? null : /^oom_kill (\d+)$/m.exec(text);
        return match !== null && Number(match[1]) > 0;
      },
      processes() {
        const pids = new Set<number>();
        for (const dir of unique) for (const pid of readPids(dir)) pids.add(pid);
        return [...pids];
      },
      kill() {
        if (version === 2 && existsSync(join(memory, 'cgroup.kill'))) {
          try {
            writeFileSync(join(memory, 'cgroup.kill'), '1');
            return;
          } catch {
            // fall back to signalling each process
          }
        }
        // A process may fork while being killed: a few passes catch what appears meanwhile.
        for (let pass = 0; pass < 5; pass++) {
          const pids = this.processes();
          if (pids.length === 0) return;
          for (const pid of pids) {
            try {
              process.kill(pid, 'SIGKILL');
            } catch {
              // already gone
            }
          }
        }
      },
      remove() {
        for (const dir of unique) {
          try {
            rmdirSync(dir);
          } catch {
            // not empty, already gone, or refused: never an error for the caller
          }
        }
      },
    };
  }
}

/** v1: the memory and cpu controllers mounted under `root` (pids where present), bases below our own groups. */
function detectV1(root: string, self: string, prefix: string | undefined): CgroupHost | string {
  const own = ownV1Groups(self);
  const bases = new Map<Controller, string>();
  for (const controller of V1_CONTROLLERS) {
    const mount = join(root, controller);
    const probe = controller === 'memory' ? 'memory.limit_in_bytes' : controller === 'cpu' ? 'cpu.shares' : 'cgroup.procs';
    if (!existsSync(join(mount, probe))) {
      if (controller === 'pids') continue;
      return `no cgroup ${controller} controller is mounted at ${mount} (cgroup v1) and ${root} is not a cgroup v2 mount`;
    }
    const base = join(mount, relativeGroup(prefix ?? own.get(controller) ?? '/'));
    try {
      accessSync(base, constants.W_OK);
    } catch {
      return `the cgroup ${base} is missing or cannot be written`;
    }
    bases.set(controller, base);
  }
  return CgroupHost.of(1, bases);
}

/** v2: one base for every controller; it must be allowed to hand memory and cpu (and pids) to child groups. */
function detectV2(root: string, self: string, options: DetectOptions): CgroupHost | string {
  const available = readQuietly(join(root, 'cgroup.controllers'))?.split(/\s+/) ?? [];
  for (const needed of ['memory', 'cpu']) {
    if (!available.includes(needed)) return `the cgroup v2 hierarchy at ${root} has no ${needed} controller`;
  }
  const own = /^0::(\/.*)$/m.exec(self)?.[1] ?? '/';
  const base = join(root, relativeGroup(options.prefix ?? own));
  const delegated = readQuietly(join(base, 'cgroup.controllers'))?.split(/\s+/) ?? [];
  for (const needed of ['memory', 'cpu']) {
    if (!delegated.includes(needed)) return `the cgroup ${base} was given no ${needed} controller (cgroup v2; delegate it, e.g. systemd Delegate=yes)`;
  }
  try {
    enableControllers(base);
  } catch (err) {
    // A group that holds processes cannot hand domain controllers on (v2's "no internal processes"
    // rule): when this process is the only one in it, it moves itself into a leaf, as systemd's
    // delegation documents, and tries again.
    const pid = options.pid ?? process.pid;
    const pids = readPids(base);
    if (base === root || pids.length !== 1 || pids[0] !== pid) {
      return `the cgroup ${base} cannot hand controllers to child groups (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); run the agent in a delegated cgroup of its own`;
    }
    try {
      const leaf = join(base, 'svc-agent');
      mkdirSync(leaf, { recursive: true });
      writeFileSync(join(leaf, 'cgroup.procs'), String(pid));
      enableControllers(base);
    } catch (again) {
      return `the cgroup ${base} cannot hand controllers to child groups (${(again as NodeJS.ErrnoException).code ?? (again as Error).message})`;
    }
  }
  const controllers: Controller[] = delegated.includes('pids') ? ['memory', 'cpu', 'pids'] : ['memory', 'cpu'];
  return CgroupHost.of(2, new Map(controllers.map((c) => [c, base])));
}

/** The groups this process is in, per v1 controller (`4:memory:/a/b`, `2:cpu,cpuacct:/`). */
function ownV1Groups(self: string): Map<Controller, string> {
  const own = new Map<Controller, string>();
  for (const line of self.split('\n')) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!match) continue;
    for (const controller of match[1]!.split(',')) {
      if ((V1_CONTROLLERS as string[]).includes(controller)) own.set(controller as Controller, match[2]!);
    }
  }
  return own;
}

/** A group path (`/a/b`) as a relative directory (`a/b`); the root is `.`. */
function relativeGroup(path: string): string {
  const relative = path.replace(/^\/+/, '').replace(/\/+$/, '');
  if (relative === '') return '.';
  if (!NAME.test(relative)) throw new Error(`invalid cgroup path ${JSON.stringify(path)}`);
  return relative;
}
