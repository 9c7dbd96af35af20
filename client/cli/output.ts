/**
 * What the CLI prints (docs/cli.md "Output"): with `--json`, one machine-readable document on stdout
 * and nothing else there; otherwise tables and lines for people, coloured only on a terminal
 * (and never with `NO_COLOR`). Notes and errors go to stderr.
 */
import Table from 'cli-table3';
import pc from 'picocolors';

/** A writable text stream and whether it is a terminal. */
export interface TextOut {
  write(text: string): unknown;
  isTTY?: boolean;
}

/** Colour functions of one stream. */
export type Colors = ReturnType<typeof pc.createColors>;

/** Where and how the CLI prints. */
export class Output {
  readonly json: boolean;
  readonly out: TextOut;
  readonly err: TextOut;
  /** Colours of stdout. */
  readonly c: Colors;
  /** Colours of stderr. */
  readonly ce: Colors;

  constructor(options: { json: boolean; out: TextOut; err: TextOut; env: NodeJS.ProcessEnv }) {
    this.json = options.json;
    this.out = options.out;
    this.err = options.err;
    const allowed = !options.env.NO_COLOR && options.env.TERM !== 'dumb';
    this.c = pc.createColors(allowed && !!options.out.isTTY);
    this.ce = pc.createColors(allowed && !!options.err.isTTY);
  }

  /** Prints `value` as JSON with `--json`, else calls `human`. */
  result(value: unknown, human: () => void): void {
    if (this.json) this.out.write(`${JSON.stringify(value, null, 2)}\n`);
    else human();
  }

  /** A line on stdout (human output only). */
  line(text = ''): void {
    this.out.write(`${text}\n`);
  }

  /** A note on stderr. */
  note(text: string): void {
    this.err.write(`${text}\n`);
  }

  /** Prints rows as a table (human output). */
  table(head: string[], rows: unknown[][]): void {
    this.line(renderTable(head, rows, this.c, !!this.out.isTTY));
  }

  /** Prints `fields` as aligned `name  value` lines (human output). */
  fields(fields: Record<string, unknown>): void {
    const width = Math.max(0, ...Object.keys(fields).map((k) => k.length));
    for (const [name, value] of Object.entries(fields)) {
      if (value === undefined) continue;
      this.line(`${this.c.dim(name.padEnd(width))}  ${cell(value)}`);
    }
  }
}

/** A table as text: bordered on a terminal, plain columns otherwise (easy to grep and cut). */
export function renderTable(head: string[], rows: unknown[][], c: Colors, terminal: boolean): string {
  if (!terminal) {
    const all = [head, ...rows.map((r) => r.map(cell))];
    const widths = head.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
    return all.map((r) => r.map((v, i) => (i === r.length - 1 ? v : (v ?? '').padEnd(widths[i]!))).join('  ')).join('\n');
  }
  const table = new Table({ head: head.map((h) => c.bold(h)), style: { head: [], border: [] } });
  for (const row of rows) table.push(row.map(cell));
  return table.toString();
}

/** One value as a table cell. */
export function cell(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  return JSON.stringify(value);
}
