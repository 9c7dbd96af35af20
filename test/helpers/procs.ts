/** Process-table helpers for tests and benchmarks that check what a process tree left behind. */
import { existsSync, readFileSync } from 'node:fs';
import { descendantsOf } from '../../infra/local/processes.ts';

/** Every live descendant pid of `pid`, read from /proc (the supervisor's own reading). */
export const descendants = descendantsOf;

/**
 * True while `pid` runs. A zombie (exited, not yet reaped: an orphan waits for init to reap it)
 * still answers kill(0), so /proc's state decides where it exists.
 */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return !existsSync('/proc/self');
  }
}

/** The command line of `pid`, arguments joined by spaces ('' once it is gone). */
export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
  } catch {
    return '';
  }
}

/** Resolves with the pids of `pids` still running after `timeoutMs` (empty as soon as all are gone). */
export async function survivors(pids: number[], timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = pids.filter(alive);
    if (left.length === 0 || Date.now() > deadline) return left;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A process's resident memory in bytes (`VmRSS`), 0 once it is gone. */
export function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}
