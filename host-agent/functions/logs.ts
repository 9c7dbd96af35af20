/**
 * Function logs (docs/functions.md "Logs"): what a function writes to its console, kept per function
 * in `functions/<project>/logs/<name>.log` under `SVCD_ROOT`, rotated by size into `<name>.log.1`
 * (one generation kept), and read back by the owner as the last lines.
 *
 * Every line is redacted before it is stored: each value of a secret of the project in the worker's
 * environment is replaced by `[secret NAME]` (longer values first, so a value holding another is
 * replaced whole). A line longer than LINE_MAX_CHARS is cut, and a cut never leaves the beginning of a
 * secret value at its end.
 *
 * Line format: `<RFC 3339 time> <stdout|stderr|agent> v<version> <text>`.
 */
import { appendFileSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Longest line kept, in characters; the rest of a longer one is dropped. */
export const LINE_MAX_CHARS = 16 * 1024;

/** Replaces secret values in text. */
export class Redactor {
  readonly #secrets: readonly (readonly [string, string])[];

  /** `secrets`: `[name, value]` pairs; empty values are nothing to hide. */
  constructor(secrets: Iterable<readonly [string, string]>) {
    this.#secrets = [...secrets].filter(([, value]) => value.length > 0).sort((a, b) => b[1].length - a[1].length);
  }

  /** `text` with every secret value replaced by `[secret NAME]`. */
  redact(text: string): string {
    let out = text;
    for (const [name, value] of this.#secrets) if (out.includes(value)) out = out.split(value).join(`[secret ${name}]`);
    return out;
  }

  /**
   * The first `max` characters of `text`, redacted, and never ending with the beginning of a secret
   * value (the rest of which was cut off, so `redact` could not see it).
   */
  cut(text: string, max: number): string {
    let kept = text.slice(0, max);
    // Judged on the text as written (redacting first could hide a longer value's beginning behind a
    // shorter value it holds), until no value's beginning is left at the end.
    for (let trimmed = true; trimmed; ) {
      trimmed = false;
      for (const [, value] of this.#secrets) {
        for (let k = Math.min(value.length - 1, kept.length); k > 0; k--) {
          if (kept.endsWith(value.slice(0, k))) {
            kept = kept.slice(0, kept.length - k);
            trimmed = true;
            break;
          }
        }
      }
    }
    return this.redact(kept);
  }
}

/** Splits a stream of text into lines; a line over LINE_MAX_CHARS is cut and the rest of it dropped. */
export class LineSplitter {
  #pending = '';
  #dropping = false;
  readonly #redactor: Redactor;
  readonly #emit: (line: string) => void;

  constructor(redactor: Redactor, emit: (line: string) => void) {
    this.#redactor = redactor;
    this.#emit = emit;
  }

  /** Takes more text; emits every line it completes. */
  push(text: string): void {
    let rest = text;
    for (;;) {
      const nl = rest.indexOf('\n');
      if (nl < 0) break;
      this.#line(this.#pending + rest.slice(0, nl));
      this.#pending = '';
      rest = rest.slice(nl + 1);
    }
    if (this.#dropping) return;
    this.#pending += rest;
    // Twice the limit is buffered before cutting, so a value straddling the limit is seen whole.
    if (this.#pending.length > 2 * LINE_MAX_CHARS) {
      this.#emit(`${this.#redactor.cut(this.#pending, LINE_MAX_CHARS)} […cut]`);
      this.#pending = '';
      this.#dropping = true;
    }
  }

  /** Emits what is left (the stream ended without a final line end). */
  end(): void {
    if (this.#pending) this.#line(this.#pending);
    this.#pending = '';
  }

  #line(raw: string): void {
    if (this.#dropping) {
      this.#dropping = false;
      return;
    }
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    this.#emit(line.length > LINE_MAX_CHARS ? `${this.#redactor.cut(line, LINE_MAX_CHARS)} […cut]` : this.#redactor.redact(line));
  }
}

/** The log files of the functions of this agent. */
export class FunctionLogStore {
  readonly #root: string;
  readonly #maxBytes: number;
  readonly #now: () => number;

  /** `root`: the functions area (`<SVCD_ROOT>/functions`). */
  constructor(root: string, maxBytes: number, now: () => number) {
    this.#root = root;
    this.#maxBytes = maxBytes;
    this.#now = now;
  }

  /** The live log of a function. */
  path(projectId: string, name: string): string {
    return join(this.#root, projectId, 'logs', `${name}.log`);
  }

  /** Appends lines (already redacted) from `stream` of `version`. Never throws: a log must not fail an invocation. */
  append(projectId: string, name: string, version: number, stream: 'stdout' | 'stderr' | 'agent', lines: readonly string[]): void {
    if (lines.length === 0) return;
    const at = new Date(this.#now()).toISOString();
    const text = lines.map((l) => `${at} ${stream} v${version} ${l.replace(/\n/g, ' ')}\n`).join('');
    const live = this.path(projectId, name);
    try {
      mkdirSync(join(this.#root, projectId, 'logs'), { recursive: true, mode: 0o700 });
      this.#rotateIfFull(live);
      appendFileSync(live, text, { mode: 0o600 });
    } catch {
      // A full disk or a removed directory loses the lines, never the invocation.
    }
  }

  /** The last `tail` lines, oldest first (the rotated generation is read when the live one has fewer). */
  tail(projectId: string, name: string, tail: number): string[] {
    const live = this.path(projectId, name);
    const lines = linesOf(live);
    if (lines.length < tail) lines.unshift(...linesOf(`${live}.1`));
    return lines.slice(-tail);
  }

  /** Removes a function's logs (it was deleted). */
  remove(projectId: string, name: string): void {
    const live = this.path(projectId, name);
    rmSync(live, { force: true });
    rmSync(`${live}.1`, { force: true });
  }

  #rotateIfFull(live: string): void {
    let size: number;
    try {
      size = statSync(live).size;
    } catch {
      return;
    }
    if (size >= this.#maxBytes) renameSync(live, `${live}.1`);
  }
}

function linesOf(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return [];
  }
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}
