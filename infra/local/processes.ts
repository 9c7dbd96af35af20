/**
 * The process table as the local stack's supervisor sees it (Linux `/proc`; elsewhere these find
 * nothing and the stack relies on its children's pipes alone). Used to record what the stack
 * started, to clear what a dead stack left behind, and to kill a whole tree on a forced exit
 * (docs/local-stack.md "Processes").
 */
import { readdirSync, readFileSync } from 'node:fs';
import { isSameProcessAlive, processCommandLine, processStartTime } from '../../shared/procs.ts';

/** A process as recorded: the pid, the kernel's start time (so a reused pid is not mistaken for it) and its command line. */
export interface ProcessRecord {
  pid: number;
  start: string | null;
  cmd: string;
}

interface Row {
  pid: number;
  ppid: number;
  pgid: number;
}

/** Every process with its parent and group, from /proc/<pid>/stat (empty without /proc). */
function processTable(): Row[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const rows: Row[] = [];
  for (const d of entries) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      // After "pid (comm) ": state, ppid, pgrp, ... (comm may hold spaces and parentheses).
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z' || fields[0] === 'X') continue;
      rows.push({ pid: Number(d), ppid: Number(fields[1]), pgid: Number(fields[2]) });
    } catch {
      // exited meanwhile
    }
  }
  return rows;
}

/** Every live descendant of `pid`. */
export function descendantsOf(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const r of processTable()) children.set(r.ppid, [...(children.get(r.ppid) ?? []), r.pid]);
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/** The record of `pid` now, or null when it is gone (or there is no /proc). */
export function recordOf(pid: number): ProcessRecord | null {
  const start = processStartTime(pid);
  const cmd = processCommandLine(pid);
  if (start === null || cmd === null) return null;
  return { pid, start, cmd: cmd.join(' ') };
}

/**
 * Records of every live member of the process groups led by `leaders`: each child the stack spawns
 * leads its own group, and what it starts in turn (java under the tether, workerd under the worker
 * host) stays in that group. Engines are not included: they take groups of their own, and a dead
 * agent's engines are adopted by the next agent (docs/lifecycle.md).
 */
export function groupMembers(leaders: Iterable<number>): ProcessRecord[] {
  const wanted = new Set(leaders);
  const out: ProcessRecord[] = [];
  for (const r of processTable()) {
    if (!wanted.has(r.pgid)) continue;
    const rec = recordOf(r.pid);
    if (rec) out.push(rec);
  }
  return out;
}

/** True while the recorded process runs: same pid, same start time and same command line. */
export function stillRunning(rec: ProcessRecord): boolean {
  if (rec.start === null || !isSameProcessAlive(rec.pid, rec.start)) return false;
  return (processCommandLine(rec.pid) ?? []).join(' ') === rec.cmd;
}

/**
 * SIGKILLs every descendant of `root` (not `root` itself). Each is first stopped with SIGSTOP, and
 * the tree read again until no new process appears, so none can fork a child that escapes or be
 * re-parented away (a killed agent's engines would otherwise move to init before they are seen).
 */
export function killTreeHard(root: number): number[] {
  const seen = new Set<number>();
  for (let pass = 0; pass < 10; pass++) {
    const found = descendantsOf(root).filter((p) => !seen.has(p));
    if (found.length === 0) break;
    for (const pid of found) {
      seen.add(pid);
      signal(pid, 'SIGSTOP');
    }
  }
  for (const pid of seen) signal(pid, 'SIGKILL');
  return [...seen];
}

/** SIGKILLs every recorded process still running (see `stillRunning`); answers those it killed. */
export function killRecorded(records: ProcessRecord[]): ProcessRecord[] {
  const running = records.filter(stillRunning);
  for (const r of running) signal(r.pid, 'SIGKILL');
  return running;
}

/** Resolves true once none of `pids` exists, false after `timeoutMs`. */
export async function waitGone(pids: number[], timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!pids.some(exists)) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** True while `pid` runs. A zombie still answers kill(0), so where /proc exists it decides. */
export function exists(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  return processStartTime(pid) !== null || !hasProc();
}

function hasProc(): boolean {
  return processStartTime(process.pid) !== null;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/** Signals every member of the process group `leader` leads; nothing when the group is empty. */
export function signalGroup(leader: number, sig: NodeJS.Signals): void {
  signal(-leader, sig);
}
