/**
 * Engine processes as the supervisor sees them (docs/lifecycle.md "Starting an engine", "Stopping"): spawned with an argv
 * array, never a shell; ready only after a validated ready line AND an answered `GET /v2/capabilities`;
 * the exit promise captured at spawn; stop = SIGTERM, a timer, SIGKILL, awaited. An engine found
 * running at agent start (pid record under `run/`) is "adopted": it is not our child, so its exit is
 * noticed by polling, and its identity is pinned by the kernel's start time of that pid so a reused pid
 * is never mistaken for it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { parseResult, serveCommand, type ArgsOf, type ResultOf } from '../engine-commands.ts';
import { isSameProcessAlive, processStartTime } from '../../shared/procs.ts';

/** A process the supervisor can signal and wait for, whether its child or adopted. */
export interface EngineProcess {
  pid: number;
  /** Kernel start time of the pid (Linux `/proc/<pid>/stat` field 22), or null where unknown. */
  startTime: string | null;
  /** Resolves once the process has exited (never rejects). */
  exited: Promise<void>;
  /** True until the exit was observed. */
  alive(): boolean;
  /** Sends a signal to exactly this process; false when it is already gone. */
  signal(sig: NodeJS.Signals): boolean;
  /** Releases timers and pipes held for this process. */
  dispose(): void;
}

// The generic /proc helpers live in shared/procs.ts (the local stack uses them too).
export { isSameProcessAlive, processCommandLine, processStartTime } from '../../shared/procs.ts';

/** The ready line `serve` prints (docs/engine.md "CLI"; host-agent/engine-commands.ts `serveCommand`). */
export type ReadyLine = ResultOf<typeof serveCommand>;

/** A freshly spawned `serve`. */
export interface SpawnedServe {
  process: EngineProcess;
  child: ChildProcess;
  /** Resolves with the ready line, or rejects with why it never came (exit, bad line). */
  ready: Promise<ReadyLine>;
  /** The engine's output before its ready line (its JSON error when it failed to start). */
  earlyOutput(): string;
  /** Exit code or signal once exited. */
  exitStatus(): { code: number | null; signal: NodeJS.Signals | null } | null;
}

/** How long an engine whose first line is not its ready line may take to exit on its own. */
const NOT_READY_GRACE_MS = 500;

/**
 * Spawns `serve --data-dir D --listen host:port --max-body-bytes N --statement-timeout-ms T` in its own process group (so a terminal's Ctrl-C
 * reaches only the agent, which stops engines in order, and engines outlive a killed agent to be
 * adopted). stdout is a pipe only for the ready line; after it, stdout goes to `onOutput`. stderr is
 * the log file descriptor itself (logs.ts explains why). SIGKILL goes to the whole process group:
 * nothing the engine started outlives it.
 */
export function spawnServe(
  options: ArgsOf<typeof serveCommand> & {
    /** The engine's argv up to its command (./engine-launch.ts: the cgroup, the engine user, the binary); `serve …` is appended. */
    command: (args: string[]) => string[];
    env: NodeJS.ProcessEnv;
    stderrFd: number;
    onOutput: (text: string) => void;
  },
): SpawnedServe {
  const [file, ...args] = options.command(serveCommand.argv(options));
  const child = spawn(file!, args, {
    detached: true,
    stdio: ['ignore', 'pipe', options.stderrFd],
    env: options.env,
  });
  const watched = watchExit(child);
  const { exited } = watched;
  const startTime = child.pid !== undefined ? processStartTime(child.pid) : null;
  const stdout = child.stdout!;
  stdout.setEncoding('utf8');
  const reading = readReadyLine(stdout, watched, options.onOutput);

  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const proc: EngineProcess = {
    pid: child.pid ?? -1,
    startTime,
    exited,
    alive: () => !gone,
    signal(sig) {
      if (gone || child.pid === undefined) return false;
      if (sig === 'SIGKILL') killGroup(child.pid);
      try {
        return child.kill(sig);
      } catch {
        return false;
      }
    },
    dispose() {
      stdout.removeAllListeners('data');
      stdout.destroy();
    },
  };
  return { process: proc, child, ready: reading.ready, earlyOutput: reading.earlyOutput, exitStatus: watched.status };
}

/** How a spawned engine ended: `exited` resolves at its exit (or when it could not be spawned at all). */
interface WatchedExit {
  exited: Promise<void>;
  status(): { code: number | null; signal: NodeJS.Signals | null } | null;
  spawnError(): Error | null;
}

function watchExit(child: ChildProcess): WatchedExit {
  let status: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  let spawnError: Error | null = null;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      status = { code, signal };
      resolve();
    });
    child.once('error', (err) => {
      spawnError = err;
      if (child.pid === undefined) {
        status = { code: null, signal: null };
        resolve();
      }
    });
  });
  return { exited, status: () => status, spawnError: () => spawnError };
}

/**
 * The engine's ready line, the first line of its stdout; everything after it goes to `onOutput`.
 * Rejects when the engine prints something else first (after a grace for its reason on stderr) or
 * exits before it is ready. `earlyOutput` is what it printed before (at most 64 KiB).
 */
function readReadyLine(stdout: Readable, watched: WatchedExit, onOutput: (text: string) => void): { ready: Promise<ReadyLine>; earlyOutput: () => string } {
  const { exited } = watched;
  let buffer = '';
  let readyDone = false;
  const ready = new Promise<ReadyLine>((resolve, reject) => {
    const onData = (chunk: string) => {
      if (readyDone) {
        onOutput(chunk);
        return;
      }
      buffer += chunk;
      if (buffer.length > 64 * 1024) buffer = buffer.slice(-64 * 1024);
      const nl = buffer.indexOf('\n');
      if (nl < 0) return;
      readyDone = true;
      const line = buffer.slice(0, nl);
      const rest = buffer.slice(nl + 1);
      if (rest) onOutput(rest);
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        parsed = null;
      }
      const r = parseResult(serveCommand, parsed);
      if (r.ok) {
        resolve(r.value);
        return;
      }
      onOutput(`${line}\n`);
      // An engine that prints something else first is usually failing and about to say why on
      // stderr and exit: a moment for that, so its reason reaches the tenant log before it is stopped.
      const refused = () => reject(new Error('the engine printed something other than its ready line'));
      const grace = setTimeout(refused, NOT_READY_GRACE_MS);
      void exited.then(() => {
        clearTimeout(grace);
        refused();
      });
    };
    stdout.on('data', onData);
    void exited.then(() => {
      if (readyDone) return;
      readyDone = true;
      if (buffer) onOutput(buffer.endsWith('\n') ? buffer : `${buffer}\n`);
      const spawnError = watched.spawnError();
      reject(
        spawnError
          ? new Error(`the engine could not be started (${(spawnError as NodeJS.ErrnoException).code ?? spawnError.message})`)
          : new Error(`the engine exited before it was ready (${formatStatus(watched.status())})`),
      );
    });
  });
  ready.catch(() => {});
  return { ready, earlyOutput: () => buffer };
}

/**
 * SIGKILLs the process group an engine leads (engines are spawned detached, so their pid is their
 * group's id): a helper process of the engine dies with it. The caller checked that `pid` is still the
 * engine, so the group is its own.
 */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // not a group leader, or the group is gone
  }
}

function formatStatus(status: { code: number | null; signal: NodeJS.Signals | null } | null): string {
  if (!status) return 'unknown status';
  return status.signal ? `signal ${status.signal}` : `exit code ${status.code}`;
}

/**
 * An engine left running by a previous agent. Its exit is noticed by polling the pid (with its start
 * time, so pid reuse cannot fool it) every `pollMs`.
 */
export function adoptProcess(pid: number, startTime: string | null, pollMs = 100): EngineProcess {
  let gone = !isSameProcessAlive(pid, startTime);
  let resolveExit!: () => void;
  const exited = new Promise<void>((r) => {
    resolveExit = r;
  });
  let timer: NodeJS.Timeout | undefined;
  const check = () => {
    if (!gone && isSameProcessAlive(pid, startTime)) return;
    gone = true;
    if (timer) clearInterval(timer);
    resolveExit();
  };
  if (gone) resolveExit();
  else {
    timer = setInterval(check, pollMs);
    timer.unref();
  }
  return {
    pid,
    startTime,
    exited,
    alive: () => {
      check();
      return !gone;
    },
    signal(sig) {
      if (!isSameProcessAlive(pid, startTime)) {
        check();
        return false;
      }
      if (sig === 'SIGKILL') killGroup(pid);
      try {
        process.kill(pid, sig);
        return true;
      } catch {
        return false;
      }
    },
    dispose() {
      if (timer) clearInterval(timer);
    },
  };
}

/**
 * Stops a process: SIGTERM, then SIGKILL after `graceMs`, then waits (bounded) for the exit.
 * Answers how it ended: `graceful`, `killed`, or `lingering` (still not gone after SIGKILL).
 */
export async function stopProcess(proc: EngineProcess, graceMs: number, killWaitMs = 5000): Promise<'graceful' | 'killed' | 'lingering'> {
  if (!proc.alive()) return 'graceful';
  proc.signal('SIGTERM');
  if (await within(proc.exited, graceMs)) return 'graceful';
  proc.signal('SIGKILL');
  return (await within(proc.exited, killWaitMs)) ? 'killed' : 'lingering';
}

/** True when `promise` settles within `ms`. */
export async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((r) => {
    timer = setTimeout(() => r(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true as const, () => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The engine's answer to the capabilities probe. */
export interface ProbeAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * `GET /v2/capabilities` with `X-Svc-Protocol-Minor: 3` on the loopback listener (docs/engine.md "`GET /v2/capabilities`"), on a
 * fresh connection, bounded by `timeoutMs`. Rejects on any transport failure or timeout.
 */
export function probeCapabilities(host: string, port: number, timeoutMs: number): Promise<ProbeAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host,
        port,
        method: 'GET',
        path: '/v2/capabilities',
        headers: { 'x-svc-protocol-minor': '3', connection: 'close' },
        agent: false,
        signal: AbortSignal.timeout(Math.max(1, timeoutMs)),
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > 1 << 20) {
            req.destroy(new Error('capabilities answer too large'));
            return;
          }
          chunks.push(c);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** Runs `fn` over `items`, at most `width` at a time. */
export async function bounded<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(width, items.length) }, async () => {
    while (next < items.length) await fn(items[next++] as T);
  });
  await Promise.all(workers);
}
