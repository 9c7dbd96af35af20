/**
 * One stack per state directory (docs/local-stack.md "One directory, one stack"): `<dir>/stack.lock`
 * names the supervisor that holds the directory (pid, the kernel's start time of that pid, when it
 * started, its URL) and the processes it started. A second stack on the same directory refuses to
 * start, naming the holder. A lock whose holder is gone, or whose pid now belongs to another process
 * (the start time differs), is stale: it is taken over, and the processes it records that still run
 * are what a dead stack left behind.
 */
import { linkSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join, relative, isAbsolute } from 'node:path';
import { isSameProcessAlive, processStartTime } from '../../shared/procs.ts';
import type { ProcessRecord } from './processes.ts';

/** What the lock file holds. */
export interface LockContent {
  pid: number;
  start: string | null;
  started_at: string;
  url: string | null;
  children: ProcessRecord[];
}

/** The directory is held by a live stack. */
export class StackLockedError extends Error {}

/** A held lock. */
export interface StackLock {
  file: string;
  /** What the previous, dead holder recorded as started (to clear before starting anew). */
  leftovers: ProcessRecord[];
  /** The previous holder's pid, when the lock was taken over. */
  previousPid: number | null;
  /** Rewrites the lock with a new URL or children list. */
  update(patch: Partial<Pick<LockContent, 'url' | 'children'>>): void;
  /** Removes the lock if this process still holds it. Idempotent. */
  release(): void;
}

/** How long a takeover guard may exist before it is judged left by a crashed takeover. */
const GUARD_STALE_MS = 10_000;

/** `dir` as the user would type it: relative to the working directory when inside it. */
export function displayDir(dir: string): string {
  const rel = relative(process.cwd(), dir);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : rel === '' ? '.' : dir;
}

function read(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

function parse(raw: string): LockContent | null {
  try {
    const v = JSON.parse(raw) as LockContent;
    return typeof v.pid === 'number' ? v : null;
  } catch {
    return null;
  }
}

function code(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException).code;
}

/**
 * Takes `<dir>/stack.lock` for this process, or throws StackLockedError naming the live holder.
 * The file is created whole (written aside, then hard-linked into place, which fails if it exists),
 * so a reader never sees half a lock. A stale lock is removed under a second, short-lived guard file,
 * and only if it is still the very lock judged stale, so two stacks taking over at once cannot both win.
 */
export async function acquireStackLock(dir: string): Promise<StackLock> {
  const file = join(dir, 'stack.lock');
  const guard = `${file}.takeover`;
  const mine: LockContent = { pid: process.pid, start: processStartTime(process.pid), started_at: new Date().toISOString(), url: null, children: [] };
  const write = (content: LockContent, into: (tmp: string) => void) => {
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(content) + '\n');
    try {
      into(tmp);
    } finally {
      try {
        unlinkSync(tmp);
      } catch {
        // renamed away
      }
    }
  };
  let leftovers: ProcessRecord[] = [];
  let previousPid: number | null = null;
  for (let attempt = 0; attempt < 50; attempt++) {
    try {
      write(mine, (tmp) => linkSync(tmp, file));
      let released = false;
      return {
        file,
        leftovers,
        previousPid,
        update(patch) {
          if (released) return;
          Object.assign(mine, patch);
          write(mine, (tmp) => renameSync(tmp, file));
        },
        release() {
          if (released) return;
          released = true;
          const now = read(file);
          if (now !== null && parse(now)?.pid === process.pid) unlinkSync(file);
        },
      };
    } catch (err) {
      if (code(err) !== 'EEXIST') throw err;
    }
    const raw = read(file);
    if (raw === null) continue;
    const holder = parse(raw);
    if (holder && isSameProcessAlive(holder.pid, holder.start)) {
      throw new StackLockedError(
        `${displayDir(dir)} is in use by another stack (pid ${holder.pid}, started ${holder.started_at}, ${holder.url ?? 'still starting'}); stop it or pass --dir`,
      );
    }
    // Stale: remove it under the guard, if it is still the same file content.
    try {
      writeFileSync(guard, String(process.pid), { flag: 'wx' });
    } catch (err) {
      if (code(err) !== 'EEXIST') throw err;
      try {
        if (Date.now() - statSync(guard).mtimeMs > GUARD_STALE_MS) unlinkSync(guard);
      } catch {
        // removed meanwhile
      }
      await new Promise((r) => setTimeout(r, 20 + Math.random() * 30));
      continue;
    }
    try {
      if (read(file) === raw) {
        unlinkSync(file);
        leftovers = holder?.children ?? [];
        previousPid = holder?.pid ?? null;
      }
    } finally {
      unlinkSync(guard);
    }
  }
  throw new Error(`could not take ${file}: it keeps changing`);
}
