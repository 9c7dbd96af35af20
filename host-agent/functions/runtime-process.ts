/**
 * The process of a function runtime (docs/functions.md "Runtimes"): workerd started with the argv
 * of the OS layer, its output read line by line (the supervisor's JSON lines to their function's
 * log, anything else to the agent's), and how it ended — its heap limit passed, its cgroup's OOM
 * killer — once its output is drained; then its cgroup, sockets and directory are removed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { Cgroup } from '../sandbox/cgroups.ts';

/** How a runtime ended. */
export interface RuntimeExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** An isolate passed its heap limit (V8 aborts the process). */
  heapLimit: boolean;
  /** The kernel's OOM killer ended it (its cgroup's memory limit). */
  oomKilled: boolean;
}

/** Longest line kept from the runtime's output; the rest of a longer one is dropped. */
const LINE_MAX = 64 * 1024;

/** What the process needs of the runtime's options. */
export interface ProcessOptions {
  /** `functions/.runtimes/<n>` under `SVCD_ROOT`, removed once it has exited. */
  dir: string;
  /** A line the runtime wrote: of a target's function (its console, or the supervisor about it), or of the runtime itself (target null). */
  onLine(target: string | null, stream: 'stdout' | 'stderr' | 'agent', text: string): void;
}

/** A started workerd: the child, its exit (once its output is drained), and the last line it wrote on stderr. */
export interface SpawnedRuntime {
  child: ChildProcess;
  exited: Promise<RuntimeExit>;
  lastError(): string;
}

/** Starts `argv` (workerd under the OS layer, in `group`); at its exit `group`, `servers` and the directory go. */
export function spawnWorkerd(argv: string[], group: Cgroup | null, servers: Server[], options: ProcessOptions): SpawnedRuntime {
  const [command, ...args] = argv;
  const child = spawn(command!, args, { env: {}, stdio: ['ignore', 'pipe', 'pipe'] });
  let heapLimit = false;
  let lastError = '';
  const drained = Promise.all(['stdout', 'stderr'].map((s) => new Promise((r) => child[s as 'stdout'].once('close', r))));
  lines(child.stdout!, (line) => {
    const parsed = parseLine(line);
    if (parsed) options.onLine(parsed.t, parsed.s === 'o' ? 'stdout' : parsed.s === 'e' ? 'stderr' : 'agent', parsed.m);
    else options.onLine(null, 'stdout', line);
  });
  lines(child.stderr!, (line) => {
    if (line.includes('Reached heap limit') || line.includes('JavaScript heap out of memory')) heapLimit = true;
    if (line.trim()) lastError = line.trim().slice(0, 300);
    const parsed = parseLine(line);
    if (parsed) options.onLine(parsed.t, parsed.s === 'o' ? 'stdout' : parsed.s === 'e' ? 'stderr' : 'agent', parsed.m);
    else options.onLine(null, 'stderr', line);
  });
  const exited = new Promise<RuntimeExit>((resolve) => {
    const finish = (code: number | null, signal: NodeJS.Signals | null) => {
      const oomKilled = group?.oomKilled() ?? false;
      group?.kill();
      group?.remove();
      closeAll(servers);
      rmSync(options.dir, { recursive: true, force: true });
      resolve({ code, signal, heapLimit, oomKilled });
    };
    child.once('exit', (code, signal) => {
      const timer = setTimeout(() => finish(code, signal), 200);
      void drained.then(() => {
        clearTimeout(timer);
        finish(code, signal);
      });
    });
    child.once('error', () => {
      if (child.pid === undefined) finish(null, null);
    });
  });
  return { child, exited, lastError: () => lastError };
}

/** Closes the runtime's sockets and their connections. */
export function closeAll(servers: Server[]): void {
  for (const s of servers) {
    s.close();
    s.closeAllConnections();
  }
}

/**
 * The workerd process below the namespaces' holder: `unshare --fork` forks once, and its child execs
 * into the setup script and then workerd. Null when it cannot be found (it exited meanwhile).
 */
export function workerdPid(holder: number): number | null {
  try {
    const children = readFileSync(`/proc/${holder}/task/${holder}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    if (children.length > 0) return children[0]!;
  } catch {
    // No children file (a kernel without it): look the process up by its parent.
  }
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === holder) return Number(entry);
    } catch {
      // Gone meanwhile.
    }
  }
  return null;
}

/** Calls `onLine` for each line of `stream` (a longer line than LINE_MAX is cut). */
function lines(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let buffer = '';
  stream.setEncoding('utf8');
  stream.on('data', (text: string) => {
    buffer += text;
    let nl = buffer.indexOf('\n');
    while (nl >= 0) {
      onLine(buffer.slice(0, nl));
      buffer = buffer.slice(nl + 1);
      nl = buffer.indexOf('\n');
    }
    if (buffer.length > LINE_MAX) {
      onLine(buffer.slice(0, LINE_MAX));
      buffer = '';
    }
  });
  stream.on('end', () => {
    if (buffer) onLine(buffer);
    buffer = '';
  });
}

/** A JSON line of the supervisor (`{t, s, m}`), or null. */
function parseLine(line: string): { t: string; s: string; m: string } | null {
  if (!line.startsWith('{"t":')) return null;
  try {
    const parsed = JSON.parse(line) as { t?: unknown; s?: unknown; m?: unknown };
    if (typeof parsed.t === 'string' && typeof parsed.s === 'string' && typeof parsed.m === 'string') return { t: parsed.t, s: parsed.s, m: parsed.m };
  } catch {
    // Not ours.
  }
  return null;
}
