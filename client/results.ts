/**
 * `/v2/sql` answers as result sets in the shape users of @libsql/client know (docs/sdk.md "Data
 * plane"), and statement arguments as the engine takes them (docs/engine.md "POST /v2/sql").
 */
import { toBase64 } from '../shared/base64.ts';

/** A value as the engine answers it: integers beyond 2^53 and BLOBs (base64) arrive as strings. */
export type Value = null | string | number;

/** A value the SDK can send as an argument. */
export type InValue = Value | boolean | bigint | Date | Uint8Array | ArrayBuffer;

/** Positional (`?`, `?NNN`) or named (`:name`, `$name`, `@name`, with or without the prefix) arguments. */
export type InArgs = InValue[] | Record<string, InValue>;

/** A statement: its SQL text alone, or with arguments (`args`, as @libsql/client, or `params`). */
export type InStatement = string | { sql: string; args?: InArgs; params?: InArgs };

/**
 * A row: readable by column name (`row.title`) and by position (`row[0]`), with a `length`, as
 * @libsql/client's rows. Only the named properties are enumerable, so `JSON.stringify(row)` and
 * `{ ...row }` give an object keyed by column.
 */
export interface Row {
  length: number;
  [index: number]: Value;
  [name: string]: Value;
}

/** One statement's result. */
export interface ResultSet {
  /** Column names, in order. */
  columns: string[];
  /** Rows, readable by name and by position. */
  rows: Row[];
  /** Rows changed by a top-level INSERT, UPDATE or DELETE (0 for any other statement). */
  rowsAffected: number;
  /** SQLite's last insert rowid after an INSERT, else undefined. */
  lastInsertRowid: bigint | undefined;
  /** The project's count of committed write transactions after the request (docs/engine.md "Lineage figures"). */
  visibleCsn: number;
  /** Rows as plain arrays (what the engine sent). */
  toArrays(): Value[][];
  /** A JSON-safe view: rows as arrays, the rowid as a decimal string. */
  toJSON(): { columns: string[]; rows: Value[][]; rowsAffected: number; lastInsertRowid: string | null; visibleCsn: number };
}

/** One statement's result as the engine answers it. */
export interface EngineStatementResult {
  columns: string[];
  rows: Value[][];
  rows_changed: number;
  last_insert_rowid: number | string | null;
}

/** The engine's answer to `POST /v2/sql`. */
export interface EngineSqlAnswer {
  results: EngineStatementResult[];
  visible_csn: number;
}

/** A statement in the engine's wire form. */
export interface WireStatement {
  sql: string;
  params?: unknown[] | Record<string, unknown>;
}

/** The result sets of an engine answer, one per statement. */
export function resultSetsOf(answer: EngineSqlAnswer): ResultSet[] {
  if (!answer || !Array.isArray(answer.results)) throw new TypeError('the engine answered no results');
  return answer.results.map((r) => resultSetOf(r, answer.visible_csn));
}

function resultSetOf(r: EngineStatementResult, visibleCsn: number): ResultSet {
  const columns = [...r.columns];
  const arrays = r.rows.map((row) => [...row]);
  const rows = arrays.map((values) => rowOf(columns, values));
  const lastInsertRowid = r.last_insert_rowid === null || r.last_insert_rowid === undefined ? undefined : BigInt(r.last_insert_rowid);
  return {
    columns,
    rows,
    rowsAffected: r.rows_changed,
    lastInsertRowid,
    visibleCsn,
    toArrays: () => arrays.map((a) => [...a]),
    toJSON: () => ({
      columns,
      rows: arrays,
      rowsAffected: r.rows_changed,
      lastInsertRowid: lastInsertRowid === undefined ? null : lastInsertRowid.toString(),
      visibleCsn,
    }),
  };
}

function rowOf(columns: string[], values: Value[]): Row {
  const row = {} as Row;
  Object.defineProperty(row, 'length', { value: values.length });
  values.forEach((value, i) => {
    Object.defineProperty(row, i, { value, enumerable: false });
    const name = columns[i];
    // The first of two columns of one name wins, as in @libsql/client.
    if (name !== undefined && !Object.hasOwn(row, name)) {
      Object.defineProperty(row, name, { value, enumerable: true, configurable: true, writable: true });
    }
  });
  return row;
}

/** A statement in the engine's wire form; throws `TypeError` naming an argument it cannot send. */
export function wireStatement(statement: InStatement, args?: InArgs): WireStatement {
  const { sql, given } = typeof statement === 'string' ? { sql: statement, given: args } : { sql: statement.sql, given: statement.args ?? statement.params ?? args };
  if (typeof sql !== 'string') throw new TypeError('sql: must be a string');
  if (given === undefined) return { sql };
  if (Array.isArray(given)) return { sql, params: given.map((v, i) => wireValue(v, `args[${i}]`)) };
  const params: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(given)) params[name] = wireValue(v, `args.${name}`);
  return { sql, params };
}

function wireValue(v: InValue, where: string): unknown {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new TypeError(`${where}: must be a finite number`);
    return v;
  }
  if (typeof v === 'bigint') {
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) {
      throw new RangeError(`${where}: integers beyond ±2^53-1 cannot be sent exactly; pass it as a string`);
    }
    return Number(v);
  }
  // Dates as milliseconds since the epoch, as @libsql/client sends them.
  if (v instanceof Date) return v.getTime();
  if (v instanceof Uint8Array) return { base64: toBase64(v) };
  if (v instanceof ArrayBuffer) return { base64: toBase64(new Uint8Array(v)) };
  throw new TypeError(`${where}: cannot be sent (${v === undefined ? 'undefined' : typeof v})`);
}
