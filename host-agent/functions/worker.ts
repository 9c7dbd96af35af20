/**
 * One function worker as the agent sees it (docs/functions.md "Workers"): a Node process running
 * ./worker-main.ts under the permission model, spawned with an argv array (never a shell) and an
 * empty environment, its start message on stdin, its console on two pipes, its control pipe on fd 3
 * (its start report; our end closing retires it) and one HTTP/1.1 connection per slot on fd 4 and up,
 * each reached through an undici Client whose one connection is that pipe. The exit promise is
 * captured at spawn; `kill` is SIGKILL, awaited: a worker holds nothing worth a graceful stop.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { Client } from 'undici';

/** How workers are started on this agent (./launch.ts). */
export interface WorkerLaunch {
  /** The Node binary workers run on. */
  node: string;
  /** The worker program (./worker-main.ts as JavaScript). */
  program: string;
  /** Commands the Node command line is wrapped in (parent-death signal, sandbox), argv form. */
  prefix: readonly string[];
}

/** One start of a worker. */
export interface WorkerStart {
  mode: 'serve' | 'check';
  /** Absolute path of the module (the only file besides the program it may read). */
  modulePath: string;
  memoryMb: number;
  env: Readonly<Record<string, string>>;
  /** `CLOUD_ORIGIN`, the origin of the URL the function's requests carry. */
  origin: string;
  /** How long loading the module may take. */
  startTimeoutMs: number;
  /** Invocations the worker serves at once (one HTTP connection each). */
  slots: number;
  /** The function's console output, as it comes. */
  onOutput(stream: 'stdout' | 'stderr', text: string): void;
}

/** The worker could not be run at all (the runtime binary is missing or cannot start). */
export class RuntimeMissingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RuntimeMissingError';
  }
}

/** The module did not load (it threw, has no default `fetch`, or took too long); `problem` says why. */
export class ModuleStartError extends Error {
  readonly problem: string;
  constructor(problem: string) {
    super(problem);
    this.name = 'ModuleStartError';
    this.problem = problem;
  }
}

/** How a worker ended. */
export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * Node's flags for a worker: the permission model with read access to two files, the heap limit, a
 * young generation of 2 MiB semi-spaces and one V8 helper thread (many workers share a host: each
 * idle one keeps about 10 MiB less, docs/functions.md "Workers").
 */
export function nodeArgs(launch: WorkerLaunch, start: Pick<WorkerStart, 'mode' | 'modulePath' | 'memoryMb' | 'slots'>): string[] {
  return [
    ...launch.prefix,
    launch.node,
    '--permission',
    `--allow-fs-read=${launch.program}`,
    `--allow-fs-read=${start.modulePath}`,
    `--max-old-space-size=${start.memoryMb}`,
    '--max-semi-space-size=2',
    '--v8-pool-size=1',
    '--disable-warning=ExperimentalWarning',
    launch.program,
    start.mode,
    start.modulePath,
    String(start.slots),
  ];
}

/** A started worker. */
export class FunctionWorker {
  readonly pid: number;
  /** One HTTP client per slot, each over its own pipe to the worker. */
  readonly clients: readonly Client[];
  /** Resolves once the process has exited (never rejects). */
  readonly exited: Promise<WorkerExit>;
  readonly #child: ChildProcess;
  #exit: WorkerExit | null = null;
  /** Clients whose pipe has closed: their slot is gone for good. */
  readonly #disconnected = new WeakSet<Client>();

  private constructor(child: ChildProcess, pipes: Socket[], exited: Promise<WorkerExit>) {
    this.#child = child;
    this.pid = child.pid!;
    this.exited = exited.then((exit) => (this.#exit = exit));
    this.clients = pipes.map((pipe) => {
      let handedOut = false;
      const client: Client = new Client('http://function.worker', {
        // The pipe is the one connection there will ever be: a second connect means it is gone.
        connect: (_options, callback) => {
          const fresh = !handedOut && !pipe.destroyed;
          handedOut = true;
          queueMicrotask(() => (fresh ? callback(null, pipe as never) : callback(new Error('the worker is gone'), null)));
        },
        pipelining: 1,
        // Idle workers are retired by the pool, never by the client; invocations have their own deadline.
        keepAliveTimeout: 24 * 3600_000,
        keepAliveMaxTimeout: 24 * 3600_000,
        headersTimeout: 0,
        bodyTimeout: 0,
      });
      client.on('disconnect', () => this.#disconnected.add(client));
      return client;
    });
  }

  /** Whether `client`'s pipe is still open (a slot whose connection closed cannot be used again). */
  connected(client: Client): boolean {
    return !this.#disconnected.has(client) && !client.destroyed;
  }

  /**
   * Spawns a worker and resolves once its module has loaded (`serve`) or been checked (`check`):
   * RuntimeMissingError when the process cannot be started, ModuleStartError when the module fails.
   */
  static async start(launch: WorkerLaunch, start: WorkerStart): Promise<FunctionWorker> {
    const [command, ...args] = nodeArgs(launch, start);
    const slots = start.mode === 'serve' ? start.slots : 0;
    const child = spawn(command!, args, { env: {}, stdio: ['pipe', 'pipe', 'pipe', 'pipe', ...Array.from({ length: slots }, () => 'pipe' as const)] });
    // The exit counts once the console pipes have ended too (or shortly after it), so the last
    // lines a dying worker wrote are in its log before anyone reads why it died.
    const drained = Promise.all(['stdout', 'stderr'].map((s) => new Promise((r) => child[s as 'stdout'].once('close', r))));
    const exited = new Promise<WorkerExit>((resolve) => {
      child.once('exit', (code, signal) => {
        const timer = setTimeout(() => resolve({ code, signal }), 200);
        void drained.then(() => {
          clearTimeout(timer);
          resolve({ code, signal });
        });
      });
      child.once('error', () => {
        if (child.pid === undefined) resolve({ code: null, signal: null });
      });
    });
    const spawnFailure = new Promise<Error>((resolve) => child.once('error', resolve));
    if (child.pid === undefined) {
      const err = await spawnFailure;
      throw new RuntimeMissingError(`the function runtime ${launch.node} cannot be started (${(err as NodeJS.ErrnoException).code ?? err.message})`);
    }
    for (const stream of ['stdout', 'stderr'] as const) {
      child[stream]!.setEncoding('utf8');
      child[stream]!.on('data', (text: string) => start.onOutput(stream, text));
    }
    child.stdin!.on('error', () => {});
    child.stdin!.end(JSON.stringify({ env: start.env, origin: start.origin }));
    const pipes = Array.from({ length: slots }, (_, i) => child.stdio[4 + i] as Socket);
    const worker = new FunctionWorker(child, pipes, exited);
    try {
      await worker.#report(child.stdio[3] as Socket, start.startTimeoutMs, launch.node);
    } catch (err) {
      await worker.kill();
      throw err;
    }
    return worker;
  }

  /**
   * Waits for the worker's start report on fd 4: `started` once its program runs, then the verdict
   * on the module. A worker that ends before it started never ran: RuntimeMissingError.
   */
  #report(control: Socket, timeoutMs: number, node: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let text = '';
      let started = false;
      let settled = false;
      let timer: NodeJS.Timeout | undefined = undefined;
      const done = (err?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        control.off('data', onData);
        if (err) reject(err);
        else resolve();
      };
      const onData = (chunk: Buffer) => {
        text += chunk.toString('utf8');
        for (let nl = text.indexOf('\n'); nl >= 0 && !settled; nl = text.indexOf('\n')) {
          const line = parseLine(text.slice(0, nl));
          text = text.slice(nl + 1);
          if (line?.started === true) started = true;
          else if (line?.ok === true) done();
          else done(new ModuleStartError(typeof line?.problem === 'string' ? line.problem : 'the module failed to load'));
        }
        if (text.length > 64 * 1024) done(new ModuleStartError('the worker answered its start with garbage'));
      };
      control.on('data', onData);
      control.on('error', () => {});
      timer = setTimeout(() => done(new ModuleStartError(`the module did not finish loading within ${timeoutMs} ms`)), timeoutMs);
      void this.exited.then((exit) => {
        // A report still in the pipe when the exit is seen gets the turn to arrive.
        setImmediate(() => {
          if (!started) done(new RuntimeMissingError(`the function runtime ${node} did not start (${describeExit(exit)})`));
          else done(new ModuleStartError(`the worker exited while loading the module (${describeExit(exit)})`));
        });
      });
    });
  }

  /** True until the exit was observed. */
  alive(): boolean {
    return this.#exit === null;
  }

  /** How the worker ended, once it has. */
  exitStatus(): WorkerExit | null {
    return this.#exit;
  }

  /** Kills the worker (SIGKILL) and waits for its exit. Idempotent. */
  async kill(): Promise<void> {
    if (this.#exit === null) this.#child.kill('SIGKILL');
    await Promise.all(this.clients.map((c) => c.destroy().catch(() => {})));
    for (const stream of this.#child.stdio) (stream as Socket | null)?.destroy();
    await this.exited;
  }
}

/** `exit code 1`, `signal SIGKILL`. */
export function describeExit(exit: WorkerExit): string {
  return exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code}`;
}

function parseLine(line: string): { started?: unknown; ok?: unknown; problem?: unknown } | null {
  try {
    const parsed: unknown = JSON.parse(line);
    return typeof parsed === 'object' && parsed !== null ? (parsed as { started?: unknown; ok?: unknown; problem?: unknown }) : null;
  } catch {
    return null;
  }
}
