/**
 * Process identity from Linux `/proc`: a pid is pinned by the kernel's start time, so a reused pid
 * is never mistaken for the process recorded under it. Used by the host agent's engine supervision
 * and by the local stack's lock and process groups. Elsewhere (no `/proc`) the checks fall back to
 * `kill(pid, 0)`.
 */
import { readFileSync } from 'node:fs';

/** The kernel's start time of `pid`, or null (no /proc, or no such process). */
export function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After "pid (comm) ", fields[0] is the state (field 3) and fields[19] the start time (field 22).
    if (fields[0] === 'Z' || fields[0] === 'X') return null;
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

/** The command line of `pid` (Linux), or null. */
export function processCommandLine(pid: number): string[] | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return null;
  }
}

/** True when `pid` is alive and, where the start time is known, still the same process. */
export function isSameProcessAlive(pid: number, startTime: string | null): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (startTime === null) return true;
  const now = processStartTime(pid);
  // No /proc entry at all (other platforms): trust kill(0). A different start time: pid reused.
  if (now === null) return existsProc() ? false : true;
  return now === startTime;
}

let procChecked: boolean | undefined;
function existsProc(): boolean {
  procChecked ??= processStartTime(process.pid) !== null;
  return procChecked;
}
