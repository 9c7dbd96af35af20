/**
 * Per-tenant engine logs (docs/lifecycle.md "Logs"): `logs/<project>/engine.log`, rotated by size into
 * `engine.log.1` … `engine.log.<keep>`. Nothing in them is ever sent to a client.
 *
 * The engine's stderr is handed the log file's descriptor directly (O_APPEND), not a pipe through the
 * agent: an engine adopted after an agent restart keeps a working stderr, whereas a pipe to a dead
 * agent would fail its next write. Rotation is therefore copy-then-truncate (logrotate's
 * `copytruncate`): O_APPEND writers continue at the new end of the truncated file. A line written
 * between the copy and the truncation can be lost; that is the documented price.
 */
import { appendFileSync, copyFileSync, mkdirSync, openSync, renameSync, statSync, truncateSync } from 'node:fs';
import type { Layout } from './layout.ts';

/** Rotated generations kept beside the live file. */
export const LOG_KEEP = 3;

/** The per-tenant log files. */
export class TenantLogs {
  readonly #layout: Layout;
  readonly #maxBytes: number;
  readonly #now: () => number;

  constructor(layout: Layout, maxBytes: number, now: () => number = Date.now) {
    this.#layout = layout;
    this.#maxBytes = maxBytes;
    this.#now = now;
  }

  /** Path of the live log of a project. */
  path(projectId: string): string {
    return this.#layout.logFile(projectId);
  }

  /** Opens the live log for appending (rotating first if it is full); the caller closes the fd. */
  openAppend(projectId: string): number {
    mkdirSync(this.#layout.logDir(projectId), { recursive: true });
    this.rotateIfNeeded(projectId);
    return openSync(this.path(projectId), 'a', 0o600);
  }

  /** Appends one line written by the agent about this tenant (timestamped). Never throws. */
  append(projectId: string, line: string): void {
    try {
      mkdirSync(this.#layout.logDir(projectId), { recursive: true });
      this.rotateIfNeeded(projectId);
      appendFileSync(this.path(projectId), `${new Date(this.#now()).toISOString()} agent: ${line.replace(/\s*$/, '')}\n`, { mode: 0o600 });
    } catch {
      // A log that cannot be written must never fail a lifecycle operation.
    }
  }

  /** Appends raw engine output (already line-shaped). Never throws. */
  appendRaw(projectId: string, text: string): void {
    if (!text) return;
    try {
      mkdirSync(this.#layout.logDir(projectId), { recursive: true });
      this.rotateIfNeeded(projectId);
      appendFileSync(this.path(projectId), text.endsWith('\n') ? text : `${text}\n`, { mode: 0o600 });
    } catch {
      // See append().
    }
  }

  /** Rotates the live log when it has grown past the limit. Answers true when it rotated. */
  rotateIfNeeded(projectId: string): boolean {
    const live = this.path(projectId);
    let size: number;
    try {
      size = statSync(live).size;
    } catch {
      return false;
    }
    if (size <= this.#maxBytes) return false;
    for (let i = LOG_KEEP - 1; i >= 1; i--) {
      try {
        renameSync(`${live}.${i}`, `${live}.${i + 1}`);
      } catch {
        // That generation does not exist yet.
      }
    }
    copyFileSync(live, `${live}.1`);
    truncateSync(live, 0);
    return true;
  }
}
