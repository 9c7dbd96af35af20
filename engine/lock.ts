/**
 * The exclusive directory lock (docs/engine.md "The directory lock": serve holds it; status, backup and restore need it).
 *
 * The lock is SQLite's own file lock: an open `BEGIN EXCLUSIVE` transaction on the empty file
 * `<dir>/lock`. SQLite takes it with a POSIX advisory lock (fcntl), which the kernel drops the moment
 * the holding process dies, however it dies. So:
 *  - two holders can never both win (the kernel arbitrates; there is no check-then-act window);
 *  - a lock left by a SIGKILLed serve is never stale: it vanished with the process, and the next
 *    taker simply gets it; no pid probing, so no false "alive" when a pid is reused.
 * The file itself is never written (it stays 0 bytes), so it cannot be corrupted. `lock-holder.json`
 * beside it records pid, command and start time for the error message of a refused taker; it is
 * informational and never consulted for the decision.
 *
 * Caveat kept in mind elsewhere: POSIX locks are per process and are released when the process closes
 * ANY descriptor of the locked file, so nothing in the engine opens `lock` except through this module.
 */
import { DatabaseSync } from 'node:sqlite';
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EngineCliError } from './exit-codes.ts';
import { LOCK_FILE, LOCK_HOLDER_FILE } from './layout.ts';
import { randomHex } from './fs-util.ts';

/** A held directory lock. */
export interface DirectoryLock {
  /** The random token written to the holder file, unique per acquisition. */
  readonly token: string;
  /** Releases the lock (idempotent). */
  release(): void;
}

const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;

/** Who the holder file says holds the lock; null when unreadable. */
function describeHolder(dir: string): string {
  try {
    const holder = JSON.parse(readFileSync(join(dir, LOCK_HOLDER_FILE), 'utf8')) as Record<string, unknown>;
    if (typeof holder.pid === 'number') {
      return ` by pid ${holder.pid} (${String(holder.command)} since ${String(holder.started_at)})`;
    }
  } catch {
    // The holder file is advisory; a missing or torn one only shortens the message.
  }
  return '';
}

/**
 * Takes the exclusive lock of directory `dir` for `command`, or throws lock_held (exit 3) at once
 * when a live process holds it. `writeHolder: false` skips the holder file (restore's staging
 * directory is renamed while locked, so the file would be removed under a stale path).
 */
export function acquireDirectoryLock(dir: string, command: string, options: { writeHolder?: boolean } = {}): DirectoryLock {
  const db = new DatabaseSync(join(dir, LOCK_FILE), { timeout: 0 });
  try {
    // MEMORY journal: no `lock-journal` file appears beside the lock, even while it is held.
    db.exec('PRAGMA journal_mode = MEMORY; BEGIN EXCLUSIVE');
  } catch (err) {
    db.close();
    const errcode = (err as { errcode?: number }).errcode;
    if (errcode === SQLITE_BUSY || errcode === SQLITE_LOCKED) {
      throw new EngineCliError('lock_held', `data directory ${dir} is locked${describeHolder(dir)}; stop the engine first`);
    }
    throw err;
  }
  const token = randomHex(16);
  const writeHolder = options.writeHolder ?? true;
  const holderPath = join(dir, LOCK_HOLDER_FILE);
  if (writeHolder) {
    const body = JSON.stringify({ pid: process.pid, command, token, started_at: new Date().toISOString() });
    const tmp = `${holderPath}.${token}.tmp`;
    writeFileSync(tmp, `${body}\n`);
    renameSync(tmp, holderPath);
  }
  let held = true;
  return {
    token,
    release() {
      if (!held) return;
      held = false;
      if (writeHolder) {
        try {
          // Only our own record is removed; under the lock nobody else can have replaced it.
          const current = JSON.parse(readFileSync(holderPath, 'utf8')) as { token?: unknown };
          if (current.token === token) rmSync(holderPath, { force: true });
        } catch {
          // Advisory file: nothing to undo.
        }
      }
      db.close();
    },
  };
}
