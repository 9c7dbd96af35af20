/**
 * Whether function runtimes can run on this host, and how (docs/functions.md "Isolation"): the
 * workerd binary (`SVCD_FUNCTION_WORKERD`, default the one of the `workerd` package), and with
 * `SVCD_FUNCTION_SANDBOX=os` (the default) the OS layer of ./sandbox.ts — an agent running as root,
 * util-linux `unshare`, `setpriv` and `umount`, and the kernel's namespaces — proved by running
 * `workerd --version` inside it. Cgroups are used when the host has them; without them the agent says
 * so at every start and runtimes have no memory, CPU or task limit beyond the isolates' heap limit.
 *
 * `auto` (what the local stack sets, never a deployment's default) takes the OS layer where the probe
 * finds it and `none` where not, warning at every start.
 *
 * Fails closed: anything missing makes every deploy and invocation answer 503
 * `function_runtime_missing` naming it. The probe runs in the background from the agent's start; a
 * failed one is retried after PROBE_RETRY_MS, so a fixed host recovers without a restart.
 */
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CgroupHost } from '../sandbox/cgroups.ts';
import { isRoot } from '../sandbox/identity.ts';
import { packagedWorkerd } from './workerd-binary.ts';
import { launchArgv, runProbe, sandboxTools, type SandboxMode, type SandboxTools } from './sandbox.ts';

/** How long a failed probe is believed before the runtime is probed again. */
const PROBE_RETRY_MS = 5_000;
/** The uid the probe runs as (nobody's): it proves switching users works, nothing more. */
const PROBE_UID = 65534;

/** How this agent starts runtimes. */
export interface RuntimeLaunch {
  mode: SandboxMode;
  workerd: string;
  tools: SandboxTools | null;
  cgroups: CgroupHost | null;
}

export { packagedWorkerd };

/** Whether this host can give runtimes the OS layer: null when it can, else why not (for `npm start`'s choice). */
export async function osLayerProblem(workerd: string | null, dir: string): Promise<string | null> {
  if (!isRoot()) return 'the OS sandbox needs a host agent running as root (to switch each runtime to its own user)';
  const tools = sandboxTools();
  if (typeof tools === 'string') return tools;
  if (workerd === null) return 'the workerd binary is not installed';
  const dirs = { root: join(dir, 'root'), cfg: join(dir, 'cfg'), in: join(dir, 'in'), out: join(dir, 'out') };
  rmSync(dir, { recursive: true, force: true });
  for (const d of Object.values(dirs)) mkdirSync(d, { recursive: true, mode: 0o755 });
  try {
    const problem = await runProbe(launchArgv({ mode: 'os', workerd, tools, dirs, uid: PROBE_UID, args: ['--version'] }), (out) => out.startsWith('workerd '));
    return problem === null ? null : `workerd does not start inside the OS sandbox (namespaces, mounts or setpriv refused): ${problem}`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The launch of this agent's runtimes, probed once (a failure again after a while). */
export class Launcher {
  readonly #mode: SandboxMode | 'auto';
  readonly #workerd: string | null;
  readonly #dir: string;
  readonly #now: () => number;
  readonly #log: (line: string) => void;
  #probe: Promise<RuntimeLaunch | string> | null = null;
  #failedAt: number | null = null;

  constructor(options: { mode: SandboxMode | 'auto'; workerd: string | undefined; dir: string; now: () => number; log: (line: string) => void }) {
    this.#mode = options.mode;
    this.#workerd = options.workerd ?? packagedWorkerd();
    this.#dir = options.dir;
    this.#now = options.now;
    this.#log = options.log;
    if (options.mode === 'none') {
      options.log(
        'agent: WARNING: SVCD_FUNCTION_SANDBOX=none: function runtimes run without the OS sandbox (no own user, namespaces or cgroup); ' +
          'the V8 isolates still hold, but a runtime escape would reach this host. Development only (docs/functions.md "Isolation").',
      );
    }
  }

  /** The launch, or why runtimes cannot run here. */
  launch(): Promise<RuntimeLaunch | string> {
    if (this.#probe === null || (this.#failedAt !== null && this.#now() - this.#failedAt > PROBE_RETRY_MS)) {
      this.#failedAt = null;
      this.#probe = this.#run().then((result) => {
        if (typeof result === 'string') {
          this.#failedAt = this.#now();
          this.#log(`agent: functions: ${result}`);
        }
        return result;
      });
    }
    return this.#probe;
  }

  /** Forgets a good probe after a runtime could not be started after all (the binary went away). */
  invalidate(): void {
    this.#probe = null;
  }

  async #run(): Promise<RuntimeLaunch | string> {
    const workerd = this.#workerd;
    if (workerd === null || !existsSync(workerd)) return `the function runtime is missing: workerd ${workerd ?? '(the workerd package)'} is not installed`;
    let mode: SandboxMode = this.#mode === 'none' ? 'none' : 'os';
    if (mode === 'os') {
      const problem = await osLayerProblem(workerd, join(this.#dir, 'probe'));
      if (problem !== null && this.#mode === 'os') return `the function runtime is missing: ${problem}; set SVCD_FUNCTION_SANDBOX=none only on a development machine`;
      if (problem !== null) {
        // `auto`, the local stack's choice (docs/local-stack.md): the OS layer only where the host gives it.
        mode = 'none';
        this.#log(
          `agent: WARNING: SVCD_FUNCTION_SANDBOX=auto: this host cannot give function runtimes the OS sandbox (${problem}); they run without it (SVCD_FUNCTION_SANDBOX=none): ` +
            'the V8 isolates still hold, but a runtime escape would reach this host. Development only (docs/functions.md "Isolation").',
        );
      }
    }
    if (mode === 'none') {
      const problem = await runProbe([workerd, '--version'], (out) => out.startsWith('workerd '));
      if (problem !== null) return `the function runtime is missing: workerd ${workerd} does not run (${problem})`;
    }
    const detected = mode === 'os' ? CgroupHost.detect() : 'SVCD_FUNCTION_SANDBOX=none';
    if (typeof detected === 'string') this.#log(`agent: WARNING: function runtimes run without cgroups (${detected}): no memory, CPU or task limit beyond each isolate's heap`);
    return { mode, workerd, tools: mode === 'os' ? (sandboxTools() as SandboxTools) : null, cgroups: typeof detected === 'string' ? null : detected };
  }

}
