/**
 * The host agent as a child process (`bin/svc-agent`), restartable over the same root and table, so
 * suites can SIGKILL it mid-operation and start it again. Its stderr (the agent's log) is kept.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from '../helpers/env.ts';
import { waitFor } from './lifecycle-helpers.ts';

/** One agent process at a time over a fixed environment. */
export class ChildAgent {
  child: ChildProcess | null = null;
  /** The agent's stderr (its log) across every start, newest last, bounded. */
  output = '';
  readonly env: Record<string, string>;
  constructor(env: Record<string, string>) {
    this.env = env;
  }

  /** Starts the agent and waits for its ready line. */
  async start(): Promise<void> {
    const child = spawn(join(REPO, 'bin/svc-agent'), [], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      this.output = (this.output + d).slice(-200_000);
    });
    await new Promise<void>((resolve, reject) => {
      let buf = '';
      const timer = setTimeout(() => reject(new Error(`agent not ready: ${this.output}`)), 30_000);
      child.stdout!.setEncoding('utf8').on('data', (d: string) => {
        buf += d;
        if (buf.includes('\n')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`agent exited ${code}: ${this.output}`));
      });
    });
  }

  /** SIGKILL, awaited. */
  async kill9(): Promise<void> {
    const child = this.child!;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    this.child = null;
  }

  /** SIGTERM (graceful shutdown), awaited. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    this.child = null;
  }

  /** Waits until the agent's log (from offset `from` of `output`) has a line matching `pattern`; answers it or null. */
  async logLine(pattern: RegExp, from = 0, ms = 10_000): Promise<string | null> {
    const found = await waitFor(() => this.output.slice(from).split('\n').find((line) => pattern.test(line)) ?? null, ms, 5);
    return found ?? null;
  }
}

/** Pids of processes whose command line contains every one of `parts` (Linux /proc). */
export function processesWith(...parts: string[]): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (parts.every((p) => cmd.includes(p))) pids.push(Number(entry));
    } catch {
      // Exited meanwhile.
    }
  }
  return pids;
}
