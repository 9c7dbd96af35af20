/**
 * `svc-cloud/kysely`: a Kysely dialect over the `/v2` data plane (docs/sdk.md "ORMs"). Kysely's own
 * SQLite compiler, adapter and introspector; each query is one `POST /v2/sql`, and `batch(client,
 * [...])` sends several in one request that the engine runs in one transaction (docs/engine.md
 * "POST /v2/sql"). The engine refuses `BEGIN … COMMIT`, so `db.transaction()` throws before
 * sending anything and names the batch. kysely is an optional peer dependency: only this module
 * imports it.
 */
import {
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type Compilable,
  type CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
} from 'kysely';
import type { SvcClient } from './client.ts';
import type { InValue, ResultSet } from './results.ts';

/** What the adapters use of a client: a `createClient({ baseUrl, key })` fits. */
export type SqlClient = Pick<SvcClient, 'sql' | 'batch'>;

/** Options of `SvcDialect`. */
export interface SvcDialectConfig {
  /** A client with the project's key. */
  client: SqlClient;
}

/** The message of `db.transaction()`: the data plane has no interactive transactions. */
export const TRANSACTION_REFUSED =
  'svc-cloud: the data plane runs no interactive transaction (the engine refuses BEGIN … COMMIT); batch(client, [...]) runs its queries in one transaction';

/** The results of `batch`: a `QueryResult` per query, typed by the query's output row. */
export type BatchResults<Q extends readonly unknown[]> = {
  -readonly [K in keyof Q]: QueryResult<Q[K] extends Compilable<infer O> ? O : Q[K] extends CompiledQuery<infer O> ? O : unknown>;
};

/** A result set as Kysely's `QueryResult`: rows as plain objects keyed by column. */
function queryResult<R>(rs: ResultSet): QueryResult<R> {
  const rows = rs.toArrays().map((values) => {
    const row: Record<string, unknown> = {};
    // The first of two columns of one name wins, as the SDK's rows do (docs/sdk.md "Data plane").
    rs.columns.forEach((name, i) => {
      if (!Object.hasOwn(row, name)) row[name] = values[i];
    });
    return row as R;
  });
  return { rows, numAffectedRows: BigInt(rs.rowsAffected), ...(rs.lastInsertRowid === undefined ? {} : { insertId: rs.lastInsertRowid }) };
}

const statementOf = (query: CompiledQuery) => ({ sql: query.sql, args: query.parameters as InValue[] });

class SvcConnection implements DatabaseConnection {
  readonly #client: SqlClient;

  constructor(client: SqlClient) {
    this.#client = client;
  }

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    return queryResult<R>(await this.#client.sql(statementOf(query)));
  }

  /** The engine answers a query whole; its rows are handed out `chunkSize` at a time. */
  async *streamQuery<R>(query: CompiledQuery, chunkSize = 100): AsyncIterableIterator<QueryResult<R>> {
    const { rows } = await this.executeQuery<R>(query);
    for (let i = 0; i < rows.length; i += chunkSize) yield { rows: rows.slice(i, i + chunkSize) };
  }
}

class SvcDriver implements Driver {
  readonly #connection: SvcConnection;

  constructor(client: SqlClient) {
    this.#connection = new SvcConnection(client);
  }

  async init(): Promise<void> {}

  /** Requests are independent HTTP calls, so every user shares one stateless connection. */
  async acquireConnection(): Promise<DatabaseConnection> {
    return this.#connection;
  }

  async beginTransaction(): Promise<void> {
    throw new Error(TRANSACTION_REFUSED);
  }

  async commitTransaction(): Promise<void> {
    throw new Error(TRANSACTION_REFUSED);
  }

  async rollbackTransaction(): Promise<void> {
    throw new Error(TRANSACTION_REFUSED);
  }

  async releaseConnection(): Promise<void> {}

  async destroy(): Promise<void> {}
}

/**
 * The dialect: `new Kysely<DB>({ dialect: new SvcDialect({ client: createClient({ baseUrl, key }) }) })`.
 * The engine's errors reach the caller as the SDK's `SvcError`s (its `code`, `source: 'engine'`).
 */
export class SvcDialect implements Dialect {
  readonly #client: SqlClient;

  constructor(config: SvcDialectConfig) {
    this.#client = config.client;
  }

  createDriver(): Driver {
    return new SvcDriver(this.#client);
  }

  createQueryCompiler(): QueryCompiler {
    return new SqliteQueryCompiler();
  }

  /** SQLite's adapter: no transactional DDL, so Kysely's `Migrator` runs without `BEGIN`. */
  createAdapter(): DialectAdapter {
    return new SqliteAdapter();
  }

  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new SqliteIntrospector(db);
  }
}

/**
 * Runs Kysely queries in one `/v2` request, in one transaction (all or nothing): one `QueryResult`
 * per query, in order. `batch(client, [db.insertInto('a').values(…), db.updateTable('b')…])`.
 */
export async function batch<const Q extends readonly (Compilable<any> | CompiledQuery<any>)[]>(
  client: SqlClient,
  queries: Q,
): Promise<BatchResults<Q>> {
  const compiled = queries.map((q) => ('compile' in q ? q.compile() : q));
  const results = await client.batch(compiled.map(statementOf));
  return results.map((rs) => queryResult(rs)) as BatchResults<Q>;
}
