/**
 * The `/v2` requests that touch the database (docs/engine.md "HTTP surface"): their bodies parsed and
 * checked, run on the executor, answered as a status and a JSON document. This runs in the executor
 * process (./executor-main.ts), which holds the one connection; the HTTP surface (./http-server.ts)
 * hands it the raw body and sends what it answers, envelope and all.
 */
import { ApiError } from './api-error.ts';
import type { Executor, StatementInput } from './executor.ts';
import type { Params } from './values.ts';

export const MAX_SEARCH_LIMIT = 100;
export const DEFAULT_SEARCH_LIMIT = 10;
export const MAX_BATCH_STATEMENTS = 1000;

/** A request the executor runs. */
export type RequestKind = 'sql' | 'search' | 'drop';

/** What a request answers: its HTTP status and the JSON document of its envelope. */
export interface Answer {
  status: number;
  json: string;
}

/** The error document of a code. */
export function errorJson(code: string, message: string): string {
  return JSON.stringify({ error: { code, message } });
}

function parseObject(body: Buffer): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    throw new ApiError('bad_request', 'request body is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ApiError('bad_request', 'request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

function rejectUnknownFields(obj: Record<string, unknown>, allowed: readonly string[], where: string): void {
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) throw new ApiError('bad_request', `unknown field ${where}${key}`);
  }
}

function statementInput(value: unknown, where: string): StatementInput {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ApiError('bad_request', `${where.slice(0, -1)} must be an object with sql and params`);
  }
  const obj = value as Record<string, unknown>;
  rejectUnknownFields(obj, where === '' ? ['sql', 'params', 'transaction'] : ['sql', 'params'], where);
  if (typeof obj.sql !== 'string') throw new ApiError('bad_request', `${where}sql must be a string`);
  const params = obj.params;
  if (params === undefined || params === null) return { sql: obj.sql };
  if (typeof params !== 'object') throw new ApiError('bad_request', `${where}params must be an array or an object`);
  return { sql: obj.sql, params: params as Params };
}

/** The statements of a `/v2/sql` body: `{"sql","params"}` or `{"statements":[...],"transaction"?:true}`. */
function sqlStatements(body: Record<string, unknown>): StatementInput[] {
  if (body.transaction !== undefined && body.transaction !== true) {
    throw new ApiError('bad_request', 'transaction must be true: a request always runs in one transaction');
  }
  if (body.statements === undefined) return [statementInput(body, '')];
  rejectUnknownFields(body, ['statements', 'transaction'], '');
  const list = body.statements;
  if (!Array.isArray(list) || list.length === 0) throw new ApiError('bad_request', 'statements must be a non-empty array');
  if (list.length > MAX_BATCH_STATEMENTS) {
    throw new ApiError('bad_request', `statements holds ${list.length} entries; at most ${MAX_BATCH_STATEMENTS}`);
  }
  return list.map((s, i) => statementInput(s, `statements[${i}].`));
}

function searchInput(body: Record<string, unknown>): { table: string; query: string; limit: number } {
  rejectUnknownFields(body, ['table', 'query', 'limit'], '');
  if (typeof body.table !== 'string') throw new ApiError('bad_request', 'table must be a string');
  if (typeof body.query !== 'string' || body.query.trim() === '') throw new ApiError('bad_request', 'query must be a non-empty string');
  const limit = body.limit ?? DEFAULT_SEARCH_LIMIT;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_SEARCH_LIMIT) {
    throw new ApiError('bad_request', `limit must be an integer from 1 to ${MAX_SEARCH_LIMIT}`);
  }
  return { table: body.table, query: body.query, limit };
}

/**
 * Runs one request: `payload` is the raw body (`sql`, `search`) or the decoded table name (`drop`).
 * An `ApiError` is answered with its status; anything else is an engine bug, logged with its stack
 * and answered 500 with the request id only.
 */
export function handleRequest(executor: Executor, kind: RequestKind, payload: Buffer, requestId: string, logError: (message: string) => void): Answer {
  try {
    switch (kind) {
      case 'sql':
        return { status: 200, json: JSON.stringify(executor.execute(sqlStatements(parseObject(payload)))) };
      case 'search': {
        const input = searchInput(parseObject(payload));
        return { status: 200, json: JSON.stringify(executor.search(input.table, input.query, input.limit)) };
      }
      case 'drop':
        return { status: 200, json: JSON.stringify(executor.dropTable(payload.toString('utf8'))) };
    }
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, json: errorJson(err.code, err.message) };
    logError(`${requestId} ${kind}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    return { status: 500, json: errorJson('internal', `internal error (request ${requestId})`) };
  }
}
