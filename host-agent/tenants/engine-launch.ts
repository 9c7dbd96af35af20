/**
 * How every engine process of this agent is started (docs/lifecycle.md "Engine isolation"), in one
 * place: `serve`, the one-shot commands (`init`, `status`, `backup`, `restore`) and the pin check's
 * `version` all take their argv from here.
 *
 * - **An unprivileged user.** An agent running as root runs engines as `SVCD_ENGINE_UID` /
 *   `SVCD_ENGINE_GID` through util-linux setpriv (../sandbox/identity.ts). The directories an engine
 *   writes (`tenants/<p>/data`, the staging directories of first starts and restores, `snapshots/<p>/`,
 *   the engines' compile cache) are that user's, mode 0700; a data directory an older agent left as
 *   root's is given to it before the next command (`chown -R`). The rest of the layout stays the
 *   agent's. An agent that is not root cannot switch users: engines run as the agent's user, which the
 *   agent logs once as a warning.
 * - **A cgroup each.** Every engine process runs in `svc-<agent id>/engine-<project>` (../sandbox/cgroups.ts)
 *   with `SVCD_ENGINE_MEMORY_MB`, at most `SVCD_ENGINE_CPU_PERCENT` of one core and the same CPU share
 *   as every other engine, entered before the engine's first instruction; the group is emptied and
 *   removed once the process is gone. Without cgroups (not root, no controllers) engines still run, and
 *   the agent logs why at start.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Settings } from '../../shared/config.ts';
import { CgroupHost, type Cgroup, type CgroupLimits } from '../sandbox/cgroups.ts';
import { allowTraversal, blockedOnTheWay, isRoot, ownTree, runAsPrefix, type ProcessUser } from '../sandbox/identity.ts';
import type { Layout } from './layout.ts';

/** Tasks (processes and threads) one engine may have: its serve, its executor and their threads. */
export const ENGINE_PIDS_MAX = 256;
/** The CPU share of every engine (v1 units; v2 weight 100): equal, so busy tenants cannot starve the rest. */
export const ENGINE_CPU_SHARES = 1024;
/** Mode of every directory an engine owns: only its user (and root) may read it. */
export const ENGINE_DIR_MODE = 0o700;

/** What the launch needs; the last three are for tests. */
export interface EngineLaunchOptions {
  settings: Settings;
  agentId: string;
  /** Absolute path of the engine binary. */
  engineBin: string;
  log: (line: string) => void;
  /** Whether the agent can switch users (default: it runs as root). */
  root?: boolean;
  /** The host's cgroups, or why there are none (default: detected). */
  cgroups?: CgroupHost | string;
  /** util-linux setpriv's path, or null when it is not installed (default: looked up). */
  setpriv?: string | null;
}

/** One engine process about to run: its argv and the group it enters (null without cgroups). */
export interface EngineCommand {
  argv: string[];
  group: Cgroup | null;
}

/** The way this agent starts engines. */
export class EngineLaunch {
  /** Who engines run as; null: as the agent's own user. */
  readonly user: ProcessUser | null;
  /** Where engine groups are made; null: engines run without cgroups. */
  readonly cgroups: CgroupHost | null;
  readonly #settings: Settings;
  /** Why no engine can be started: a root agent without setpriv, or a root the engine user cannot reach. */
  #problem: string | null = null;
  readonly #agentId: string;
  readonly #bin: string;
  readonly #prefix: string[];
  readonly #log: (line: string) => void;

  constructor(options: EngineLaunchOptions) {
    const { settings, log } = options;
    this.#settings = settings;
    this.#agentId = options.agentId;
    this.#bin = options.engineBin;
    this.#log = log;
    const user = { uid: settings.SVCD_ENGINE_UID, gid: settings.SVCD_ENGINE_GID };
    if (options.root ?? isRoot()) {
      this.user = user;
      const prefix = runAsPrefix(user, options.setpriv === undefined ? undefined : options.setpriv);
      this.#prefix = typeof prefix === 'string' ? [] : prefix;
      this.#problem = typeof prefix === 'string' ? `engines cannot run as uid ${user.uid}: ${prefix}` : null;
      if (this.#problem) log(`agent: ${this.#problem}; tenants cannot run on this host`);
    } else {
      this.user = null;
      this.#prefix = [];
      log(`agent: warning: engines run as the agent's own user (uid ${process.getuid?.() ?? '?'}), not as SVCD_ENGINE_UID ${user.uid}: only an agent running as root can switch them`);
    }
    const cgroups = options.cgroups ?? CgroupHost.detect();
    this.cgroups = typeof cgroups === 'string' ? null : cgroups;
    if (typeof cgroups === 'string') log(`agent: warning: engines run without cgroups (no memory or CPU limit per engine): ${cgroups}`);
  }

  /** Why no engine can be started on this host, or null (every engine start and command is then 503). */
  get problem(): string | null {
    return this.#problem;
  }

  /** The limits of every engine's group. */
  get limits(): CgroupLimits {
    const percent = this.#settings.SVCD_ENGINE_CPU_PERCENT;
    return {
      memoryBytes: this.#settings.SVCD_ENGINE_MEMORY_MB * 1024 * 1024,
      cpuShares: ENGINE_CPU_SHARES,
      ...(percent > 0 ? { cpuQuotaPercent: percent } : {}),
      pidsMax: ENGINE_PIDS_MAX,
    };
  }

  /** The group of a project's engine processes. */
  groupName(projectId: string): string {
    return `svc-${this.#agentId}/engine-${projectId}`;
  }

  /**
   * The argv of `engine args…` for `projectId` (null: a command of no project, the pin check's
   * `version`, which runs as the engine user but in no group). The project's group is made (or its
   * limits set again) first; a group the kernel refuses throws: an engine never runs unbounded on a
   * host that has cgroups.
   */
  command(args: string[], projectId: string | null): EngineCommand {
    if (this.#problem) throw new Error(this.#problem);
    const argv = [...this.#prefix, this.#bin, ...args];
    if (projectId === null || this.cgroups === null) return { argv, group: null };
    const group = this.cgroups.create(this.groupName(projectId), this.limits);
    return { argv: this.cgroups.wrap(group, argv), group };
  }

  /** Ends what is left in a project's group (an engine's straggler) and removes the group; never throws. */
  release(projectId: string): void {
    if (this.cgroups === null) return;
    try {
      const group = this.cgroups.open(this.groupName(projectId));
      group.kill();
      group.remove();
    } catch (err) {
      this.#log(`agent: removing the cgroup of ${projectId} failed: ${(err as Error).message}`);
    }
  }

  /** Removes the empty groups a previous run of this agent left (at start, after adoption) or this one (at stop). */
  sweep(): void {
    this.cgroups?.sweep(`svc-${this.#agentId}`);
  }

  /**
   * At start: the engine user can reach the layout (search permission on the root and the areas the
   * agent owns), and owns the compile cache. A directory above the root that stops the engine user is
   * not the agent's to open: it is logged, and engines are refused (503) until the agent restarts
   * with a root they can reach, rather than failing one by one.
   */
  prepareLayout(layout: Layout): void {
    const user = this.user;
    if (user === null) return;
    const cache = layout.compileCache;
    mkdirSync(cache, { recursive: true });
    for (const dir of [layout.root, layout.tenants, layout.snapshots, dirname(cache)]) allowTraversal(dir);
    ownTree(cache, user, ENGINE_DIR_MODE);
    const blocked = blockedOnTheWay(layout.root, user);
    if (blocked !== null) {
      this.#problem = `engines (uid ${user.uid}) cannot reach ${layout.root}: ${blocked} is not searchable by them (chmod o+x it, or choose another SVCD_ROOT)`;
      this.#log(`agent: ${this.#problem}; tenants cannot run on this host`);
    }
  }

  /**
   * Before an engine command or start for a project: its tenant directory exists and can be searched,
   * and its data directory and snapshot root, where they exist, are the engine user's (repaired when
   * an older agent left them root's).
   */
  prepareProject(layout: Layout, projectId: string): void {
    const tenantDir = layout.tenantDir(projectId);
    mkdirSync(tenantDir, { recursive: true });
    const user = this.user;
    if (user === null) return;
    allowTraversal(tenantDir);
    for (const dir of [layout.dataDir(projectId), layout.snapshotRoot(projectId)]) {
      if (!existsSync(dir)) continue;
      if (ownTree(dir, user, ENGINE_DIR_MODE)) this.#log(`agent: ${dir} given to the engine user (uid ${user.uid}, mode 0700)`);
    }
  }

  /** Makes `dir` (its parent exists) as a directory only the engine user may use: where an engine builds what it makes. */
  privateDir(dir: string): void {
    mkdirSync(dir, { mode: ENGINE_DIR_MODE });
    if (this.user !== null) ownTree(dir, this.user, ENGINE_DIR_MODE);
  }
}
