/**
 * `svc-cloud/drizzle`: Drizzle ORM over the `/v2` data plane (docs/sdk.md "ORMs"), through
 * `drizzle-orm/sqlite-proxy`. Each query is one `POST /v2/sql`; `db.batch([...])` is one request
 * run by the engine in one transaction (docs/engine.md "POST /v2/sql"). The engine refuses
 * `BEGIN … COMMIT`, so `db.transaction()` throws before sending anything and names the batch.
 * drizzle-orm is an optional peer dependency: only this module imports it.
 */
import type { DrizzleConfig } from 'drizzle-orm';
import { drizzle as drizzleProxy, type SqliteRemoteDatabase } from 'drizzle-orm/sqlite-proxy';
import type { SvcClient } from './client.ts';
import type { InValue, ResultSet, Value } from './results.ts';

/** What the adapters use of a client: a `createClient({ baseUrl, key })` fits. */
export type SqlClient = Pick<SvcClient, 'sql' | 'batch'>;

/** How Drizzle asked a query to be answered (drizzle-orm/sqlite-proxy's callback contract). */
type Method = 'run' | 'all' | 'values' | 'get';

/** What the callbacks answer: Drizzle reads `rows`; `run()` hands the whole answer to the caller. */
export interface SvcRemoteResult {
  /** Rows as arrays in column order; for `get`, the first row's array (or undefined). */
  rows: Value[][] | Value[] | undefined;
  columns: string[];
  rowsAffected: number;
  lastInsertRowid: bigint | undefined;
}

/** The message of `db.transaction()`: the data plane has no interactive transactions. */
export const TRANSACTION_REFUSED =
  'svc-cloud: the data plane runs no interactive transaction (the engine refuses BEGIN … COMMIT); db.batch([...]) runs its queries in one transaction';

function answer(rs: ResultSet, method: Method): SvcRemoteResult {
  const arrays = rs.toArrays();
  return {
    rows: method === 'get' ? arrays[0] : arrays,
    columns: rs.columns,
    rowsAffected: rs.rowsAffected,
    lastInsertRowid: rs.lastInsertRowid,
  };
}

/**
 * A Drizzle database over `client`'s data plane: `drizzle(createClient({ baseUrl, key }), { schema })`.
 * A failed query rejects with Drizzle's `DrizzleQueryError` whose `cause` is the `SvcError` (the
 * engine's `code`, `source: 'engine'`); a failed batch rejects with the `SvcError` itself.
 */
export function drizzle<TSchema extends Record<string, unknown> = Record<string, never>>(
  client: SqlClient,
  config: DrizzleConfig<TSchema> = {},
): SqliteRemoteDatabase<TSchema> {
  const db = drizzleProxy<TSchema>(
    async (sql, params, method) => answer(await client.sql({ sql, args: params as InValue[] }), method) as { rows: any[] },
    async (queries) => {
      const results = await client.batch(queries.map((q) => ({ sql: q.sql, args: q.params as InValue[] })));
      return results.map((rs, i) => answer(rs, queries[i]!.method) as { rows: any[] });
    },
    config,
  );
  db.transaction = () => Promise.reject(new Error(TRANSACTION_REFUSED));
  return db;
}

export type { SqliteRemoteDatabase };
