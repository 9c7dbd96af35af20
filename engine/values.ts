/** Converting values between JSON and SQLite at the `/v2/sql` boundary (docs/engine.md "Values"). */
import type { SQLInputValue, SQLOutputValue } from 'node:sqlite';
import { ApiError } from './api-error.ts';

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const MIN_SAFE = -MAX_SAFE;

/**
 * A SQLite value as JSON: integers as numbers while they are exact in a double, else as decimal
 * strings; blobs as base64 strings; text and reals unchanged.
 */
export function toJsonValue(value: SQLOutputValue): unknown {
  if (typeof value === 'bigint') return value <= MAX_SAFE && value >= MIN_SAFE ? Number(value) : value.toString();
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64');
  return value;
}

/** Converts every cell of array rows in place (rows come from `setReturnArrays(true)` statements). */
export function convertRows(rows: unknown[]): unknown[][] {
  for (const row of rows as SQLOutputValue[][]) {
    for (let i = 0; i < row.length; i++) {
      const v = row[i] as SQLOutputValue;
      if (typeof v === 'bigint' || v instanceof Uint8Array) (row as unknown[])[i] = toJsonValue(v);
    }
  }
  return rows as unknown[][];
}

/**
 * A JSON parameter as a SQLite value. Integers bind as INTEGER (node:sqlite would bind every JS
 * number as REAL), booleans as 1/0, `{"base64": "..."}` as a blob. `where` names the parameter
 * in the error message.
 */
export function toSqlValue(value: unknown, where: string): SQLInputValue {
  switch (typeof value) {
    case 'string':
      return value;
    case 'number':
      return Number.isSafeInteger(value) ? BigInt(value) : value;
    case 'boolean':
      return value ? 1n : 0n;
    case 'object': {
      if (value === null) return null;
      const blob = value as Record<string, unknown>;
      if (!Array.isArray(value) && typeof blob.base64 === 'string' && Object.keys(blob).length === 1) {
        return Buffer.from(blob.base64, 'base64');
      }
      break;
    }
  }
  throw new ApiError('bad_request', `${where} must be null, a boolean, a number, a string or {"base64": string}`);
}

/** Statement parameters: positional (array) or named (object keyed by name, with or without its prefix). */
export type Params = unknown[] | Record<string, unknown>;

/** Binds request parameters to argument lists for `StatementSync.all/run`. */
export function bindParams(params: Params | undefined, where: string): SQLInputValue[] | [Record<string, SQLInputValue>] {
  if (params === undefined) return [];
  if (Array.isArray(params)) {
    const out: SQLInputValue[] = new Array(params.length);
    for (let i = 0; i < params.length; i++) out[i] = toSqlValue(params[i], `${where}[${i}]`);
    return out;
  }
  const named: Record<string, SQLInputValue> = {};
  for (const key of Object.keys(params)) named[key] = toSqlValue(params[key], `${where}.${key}`);
  return [named];
}
