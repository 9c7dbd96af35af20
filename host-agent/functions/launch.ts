/**
 * How this agent starts function workers (docs/functions.md "Workers", "Isolation"): the Node binary
 * (`SVCD_FUNCTION_NODE`, default the agent's own), the worker program, and what the command is
 * wrapped in:
 *
 * - `setpriv --pdeathsig KILL` when util-linux's setpriv is installed: the kernel kills a worker whose
 *   agent died, however it died (a worker stuck in a loop would never notice its pipe closing);
 * - with `SVCD_FUNCTION_SANDBOX=unshare`, util-linux's `unshare` puts each worker in new user,
 *   network, PID, IPC and UTS namespaces: no network at all (not even the host's loopback
 *   listeners), and no other process to see or signal.
 *
 * The runtime is probed once (in the background from the agent's start): a binary that is missing,
 * too old for `--permission`, or a sandbox the host refuses makes every deploy and invocation answer
 * 503 `function_runtime_missing`. A failed probe is retried after a while, so a fixed host recovers
 * without a restart.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { WorkerLaunch } from './worker.ts';

/** The sandboxes a deployment can choose (`SVCD_FUNCTION_SANDBOX`). */
export type Sandbox = 'none' | 'unshare';

/** How long a failed probe is believed before the runtime is probed again. */
const PROBE_RETRY_MS = 5_000;
/** How long a probe may take. */
const PROBE_TIMEOUT_MS = 15_000;
/** Where system tools are looked for (the agent's own PATH is not consulted: no module reads the environment). */
const SYSTEM_PATH = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

/** The absolute path of a system tool, or null when it is not installed. */
export function systemTool(name: string): string | null {
  for (const dir of SYSTEM_PATH) {
    const path = join(dir, name);
    if (existsSync(path)) return path;
  }
  return null;
}

/**
 * Writes the worker program as JavaScript under `dir` (types stripped once here, so a worker's
 * start pays no TypeScript cost) and answers its path. The name carries a hash of the source:
 * agents of different versions never share a file, and a file is never rewritten in place.
 */
export function writeWorkerProgram(dir: string): string {
  const source = readFileSync(fileURLToPath(new URL('./worker-main.ts', import.meta.url)), 'utf8');
  // Node calls the API experimental and says so on stderr, once, outside the agent's JSON log lines.
  const warn = process.emitWarning;
  process.emitWarning = () => {};
  let code: string;
  try {
    code = stripTypeScriptTypes(source, { mode: 'strip' });
  } finally {
    process.emitWarning = warn;
  }
  const path = join(dir, `worker-${createHash('sha256').update(code).digest('hex').slice(0, 16)}.mjs`);
  if (!existsSync(path)) {
    mkdirSync(dir, { recursive: true });
    const temp = `${path}.${process.pid}.tmp`;
    writeFileSync(temp, code, { mode: 0o644 });
    renameSync(temp, path);
  }
  return path;
}

/** The command prefix for `sandbox` on this host, or the reason it cannot be had. */
export function launchPrefix(sandbox: Sandbox): string[] | string {
  const prefix: string[] = [];
  const setpriv = systemTool('setpriv');
  if (setpriv) prefix.push(setpriv, '--pdeathsig', 'KILL', '--');
  if (sandbox === 'unshare') {
    const unshare = systemTool('unshare');
    if (!unshare) return 'SVCD_FUNCTION_SANDBOX=unshare needs util-linux unshare, which is not installed';
    prefix.push(unshare, '--user', '--map-root-user', '--net', '--pid', '--fork', '--kill-child', '--ipc', '--uts', '--');
  }
  return prefix;
}

/** The launch of this agent's workers, and whether the runtime can run here. */
export class Launcher {
  readonly #node: string;
  readonly #sandbox: Sandbox;
  readonly #dir: string;
  readonly #now: () => number;
  readonly #log: (line: string) => void;
  #probe: Promise<WorkerLaunch | string> | null = null;
  /** When the last probe failed (null: it did not, or none ran yet). */
  #failedAt: number | null = null;

  constructor(options: { node: string; sandbox: Sandbox; dir: string; now: () => number; log: (line: string) => void }) {
    this.#node = options.node;
    this.#sandbox = options.sandbox;
    this.#dir = options.dir;
    this.#now = options.now;
    this.#log = options.log;
  }

  /** The launch, or why the runtime cannot run on this host (probed once, a failure again after a while). */
  launch(): Promise<WorkerLaunch | string> {
    if (this.#probe === null || (this.#failedAt !== null && this.#now() - this.#failedAt > PROBE_RETRY_MS)) {
      this.#failedAt = null;
      this.#probe = this.#run().then((result) => {
        if (typeof result === 'string') this.#failedAt = this.#now();
        return result;
      });
    }
    return this.#probe;
  }

  /** Forgets a good probe after a worker could not be started after all (the binary went away). */
  invalidate(): void {
    this.#probe = null;
  }

  async #run(): Promise<WorkerLaunch | string> {
    const prefix = launchPrefix(this.#sandbox);
    if (typeof prefix === 'string') return this.#failed(prefix);
    let program: string;
    try {
      program = writeWorkerProgram(this.#dir);
    } catch (err) {
      return this.#failed(`the worker program cannot be written under ${this.#dir} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
    const problem = await probe([...prefix, this.#node, '--permission', `--allow-fs-read=${program}`, '-e', 'process.stdout.write(process.version)']);
    if (problem) return this.#failed(`the function runtime ${this.#node} cannot run workers here: ${problem}`);
    return { node: this.#node, program, prefix };
  }

  #failed(reason: string): string {
    this.#log(`agent: functions: ${reason}`);
    return reason;
  }
}

/** Runs the probe command: null when it printed a Node version and exited 0, else what went wrong. */
function probe(argv: string[]): Promise<string | null> {
  return new Promise((resolve) => {
    const [command, ...args] = argv;
    const child = spawn(command!, args, { env: {}, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-500)));
    const timer = setTimeout(() => child.kill('SIGKILL'), PROBE_TIMEOUT_MS);
    child.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(e.code ?? e.message);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0 && /^v\d+\./.test(out)) resolve(null);
      else resolve(`${signal ? `signal ${signal}` : `exit code ${code}`}${err.trim() ? `: ${err.trim().split('\n')[0]}` : ''}`);
    });
  });
}
