/**
 * Runs `/v2` SQL, search and table drops on the serving connection and keeps the lineage figures
 * (docs/engine.md "Lineage figures"): `visible_csn` +1 per committed transaction that changed a row
 * or the schema, `catalog_version` +1 per statement that changed the schema, `logical_time_micros` = commit time,
 * strictly increasing. The figures are updated inside the user's transaction, so they commit (and
 * survive a crash) together with the write they count.
 *
 * node:sqlite is synchronous and the engine has exactly one connection, so every request runs start to
 * finish without interleaving: a transaction never spans an `await`.
 *
 * A SQLite authorizer, installed once, guards the connection the engine shares across requests:
 * no explicit transactions (batches give atomicity), no ATTACH/DETACH or VACUUM (no path outside the
 * data directory can be touched), no setting pragmas (the engine owns WAL and synchronous=FULL),
 * no temporary objects, and no change to the engine's own `_svc_meta` table. At prepare time the same
 * callback classifies the statement: read-only statements run outside any transaction and count nothing.
 */
import { constants } from 'node:sqlite';
import type { DatabaseSync, StatementSync, SQLInputValue } from 'node:sqlite';
import { ApiError } from './api-error.ts';
import { META_TABLE, checkpointTruncate, readFigures } from './database.ts';
import type { LineageFigures } from './database.ts';
import { countStatements } from './sql-text.ts';
import { bindParams, convertRows, toJsonValue } from './values.ts';
import type { Params } from './values.ts';

/** One statement of a `/v2/sql` request. */
export interface StatementInput {
  sql: string;
  params?: Params;
}

/** The result of one statement. */
export interface StatementResult {
  columns: string[];
  rows: unknown[][];
  rows_changed: number;
  /** The rowid SQLite reports after an INSERT statement; null for every other statement. */
  last_insert_rowid: number | string | null;
}

/** The answer to `POST /v2/sql`. */
export interface SqlResponse {
  results: StatementResult[];
  visible_csn: number;
}

/** One full-text hit: rowid, bm25 rank (lower is better), snippet, then the table's columns. */
export type SearchHit = Record<string, unknown>;

/** A statement compiled from user SQL, with what the authorizer learned about it. */
interface Prepared {
  stmt: StatementSync;
  readOnly: boolean;
  returnsRows: boolean;
  /** Top-level INSERT/UPDATE/DELETE (not DDL): reports rows_changed. */
  dml: boolean;
  /** Top-level INSERT: reports last_insert_rowid. */
  insert: boolean;
  /** Result column names, valid while `columnsGeneration` equals the executor's schema generation. */
  columns: string[];
  columnsGeneration: number;
}

interface Capture {
  actions: number;
  write: boolean;
  ddl: boolean;
  dml: boolean;
  insert: boolean;
}

interface Transaction {
  changesBefore: number;
  schemaChanges: number;
}

const C = constants;
/** Actions that only read. A statement made of nothing else runs outside a transaction. */
const READ_ACTIONS = new Set<number>([C.SQLITE_SELECT, C.SQLITE_READ, C.SQLITE_FUNCTION, C.SQLITE_RECURSIVE, C.SQLITE_PRAGMA]);
const DDL_ACTIONS = new Set<number>([
  C.SQLITE_CREATE_INDEX,
  C.SQLITE_CREATE_TABLE,
  C.SQLITE_CREATE_TRIGGER,
  C.SQLITE_CREATE_VIEW,
  C.SQLITE_CREATE_VTABLE,
  C.SQLITE_DROP_INDEX,
  C.SQLITE_DROP_TABLE,
  C.SQLITE_DROP_TRIGGER,
  C.SQLITE_DROP_VIEW,
  C.SQLITE_DROP_VTABLE,
  C.SQLITE_ALTER_TABLE,
  C.SQLITE_ANALYZE,
  C.SQLITE_REINDEX,
]);
const TEMP_ACTIONS = new Set<number>([
  C.SQLITE_CREATE_TEMP_INDEX,
  C.SQLITE_CREATE_TEMP_TABLE,
  C.SQLITE_CREATE_TEMP_TRIGGER,
  C.SQLITE_CREATE_TEMP_VIEW,
]);
/** Pragmas that take a table or index argument and only report. */
const PRAGMAS_WITH_ARGUMENT = new Set([
  'table_info',
  'table_xinfo',
  'table_list',
  'index_list',
  'index_info',
  'index_xinfo',
  'foreign_key_list',
  'foreign_key_check',
  'integrity_check',
  'quick_check',
]);
/** Pragmas allowed in their query form only (`PRAGMA user_version`, never `= 5`). */
const PRAGMAS_QUERY_ONLY = new Set([
  'application_id',
  'collation_list',
  'compile_options',
  'data_version',
  'encoding',
  'foreign_keys',
  'freelist_count',
  'function_list',
  'journal_mode',
  'module_list',
  'page_count',
  'page_size',
  'pragma_list',
  'schema_version',
  'synchronous',
  'user_version',
]);
const SCHEMA_TABLES = new Set(['sqlite_master', 'sqlite_schema', 'sqlite_temp_master', 'sqlite_temp_schema']);
const META_REFUSAL = `${META_TABLE} is the engine's own table: it can be read, never changed`;
const TRANSACTION_REFUSAL =
  'explicit transactions (BEGIN, COMMIT, ROLLBACK, SAVEPOINT) are not supported: send {"statements":[...]} to run several statements in one transaction';

/** Table and column names accepted by `/v2/search` and `DELETE /v2/tables/{name}`. */
export const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const STATEMENT_CACHE_SIZE = 256;
/** A statement whose first keyword, after any comments, is VACUUM. */
const VACUUM = /^(?:\s|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*vacuum\b/i;

function isMeta(name: string | null): boolean {
  return name !== null && name.toLowerCase() === META_TABLE;
}

/** Why the authorizer refuses an action from user SQL; null when it is allowed. */
function refusal(action: number, arg1: string | null, arg2: string | null): string | null {
  switch (action) {
    case C.SQLITE_TRANSACTION:
    case C.SQLITE_SAVEPOINT:
      return TRANSACTION_REFUSAL;
    case C.SQLITE_ATTACH:
    case C.SQLITE_DETACH:
      return 'ATTACH and DETACH are not supported: a tenant has exactly one database';
    case C.SQLITE_PRAGMA: {
      const name = (arg1 ?? '').toLowerCase();
      if (PRAGMAS_WITH_ARGUMENT.has(name) || (arg2 === null && PRAGMAS_QUERY_ONLY.has(name))) return null;
      return `PRAGMA ${arg1 ?? ''}${arg2 === null ? '' : ' with a value'} is not allowed: the engine owns the connection settings (read-only pragmas such as table_info, index_list and user_version are allowed)`;
    }
    case C.SQLITE_INSERT:
    case C.SQLITE_UPDATE:
    case C.SQLITE_DELETE:
    case C.SQLITE_DROP_TABLE:
      return isMeta(arg1) ? META_REFUSAL : null;
    case C.SQLITE_ALTER_TABLE:
    case C.SQLITE_CREATE_INDEX:
    case C.SQLITE_CREATE_TRIGGER:
    case C.SQLITE_DROP_INDEX:
    case C.SQLITE_DROP_TRIGGER:
      return isMeta(arg2) ? META_REFUSAL : null;
    default:
      if (TEMP_ACTIONS.has(action)) {
        return 'temporary tables, views, indexes and triggers are not supported: every request shares one connection';
      }
      return null;
  }
}

/** The message of a failed SQLite call, or the authorizer's reason when it was the authorizer. */
function sqlFailure(err: unknown, denial: string | null, label: string, code: 'sql_error' | 'bad_query' = 'sql_error'): ApiError {
  if (err instanceof ApiError) return err;
  const message = denial ?? (err instanceof Error ? err.message : String(err));
  return new ApiError(code, `${label}${message}`);
}

function run(stmt: StatementSync, args: SQLInputValue[] | [Record<string, SQLInputValue>]) {
  return stmt.run(...(args as SQLInputValue[]));
}

function all(stmt: StatementSync, args: SQLInputValue[] | [Record<string, SQLInputValue>]): unknown[] {
  return stmt.all(...(args as SQLInputValue[]));
}

/** The serving connection's request executor. */
export class Executor {
  private readonly db: DatabaseSync;
  private figures: LineageFigures;
  private readonly cache = new Map<string, Prepared>();
  private capture: Capture | null = null;
  private internalDepth = 0;
  /**
   * Bumped whenever a statement changes the schema (even if later rolled back): a cached statement's
   * column names (`SELECT *` after ALTER TABLE) are recomputed when it moved. statement.columns()
   * is too costly to call on every point read.
   */
  private schemaGeneration = 0;
  private denial: string | null = null;
  private readonly totalChangesStmt: StatementSync;
  private readonly schemaVersionStmt: StatementSync;
  private readonly changesStmt: StatementSync;
  private readonly updateMetaStmt: StatementSync;
  private readonly tableLookupStmt: StatementSync;
  private readonly beginStmt: StatementSync;
  private readonly commitStmt: StatementSync;
  private readonly rollbackStmt: StatementSync;
  /** SQLite's library version, for capabilities. */
  readonly sqliteVersion: string;

  /** Called just before a transaction that changed something commits (./executor-main.ts tells `serve`). */
  private readonly beforeCommit: () => void;

  constructor(db: DatabaseSync, options: { beforeCommit?: () => void } = {}) {
    this.db = db;
    this.beforeCommit = options.beforeCommit ?? (() => {});
    this.figures = readFigures(db);
    db.setAuthorizer((action, arg1, arg2) => this.authorize(action, arg1, arg2));
    this.internalDepth++;
    try {
      this.totalChangesStmt = db.prepare('SELECT total_changes()');
      this.totalChangesStmt.setReturnArrays(true);
      this.schemaVersionStmt = db.prepare('PRAGMA schema_version');
      this.schemaVersionStmt.setReturnArrays(true);
      this.changesStmt = db.prepare('SELECT changes(), last_insert_rowid()');
      this.changesStmt.setReturnArrays(true);
      this.changesStmt.setReadBigInts(true);
      this.updateMetaStmt = db.prepare(
        `UPDATE ${META_TABLE} SET visible_csn = ?, catalog_version = ?, logical_time_micros = ? WHERE id = 1`,
      );
      this.tableLookupStmt = db.prepare("SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name = ? COLLATE NOCASE");
      this.beginStmt = db.prepare('BEGIN IMMEDIATE');
      this.commitStmt = db.prepare('COMMIT');
      this.rollbackStmt = db.prepare('ROLLBACK');
      this.sqliteVersion = String((db.prepare('SELECT sqlite_version() AS v').get() as { v: unknown }).v);
    } finally {
      this.internalDepth--;
    }
  }

  /** The current lineage figures (as last committed). */
  get lineage(): LineageFigures {
    return this.figures;
  }

  private authorize(action: number, arg1: string | null, arg2: string | null): number {
    // Internal statements may be re-prepared by SQLite later (after a schema change), which calls this
    // again: they run inside internal() so the guard never refuses the engine's own bookkeeping.
    if (this.internalDepth > 0) return C.SQLITE_OK;
    const reason = refusal(action, arg1, arg2);
    if (reason !== null) {
      this.denial = reason;
      return C.SQLITE_DENY;
    }
    const capture = this.capture;
    if (capture !== null) {
      capture.actions++;
      if (!READ_ACTIONS.has(action)) capture.write = true;
      if (DDL_ACTIONS.has(action)) capture.ddl = true;
      if ((action === C.SQLITE_INSERT || action === C.SQLITE_UPDATE || action === C.SQLITE_DELETE) && !SCHEMA_TABLES.has(arg1 ?? '')) {
        capture.dml = true;
        if (action === C.SQLITE_INSERT) capture.insert = true;
      }
    }
    return C.SQLITE_OK;
  }

  private internal<T>(fn: () => T): T {
    this.internalDepth++;
    try {
      return fn();
    } finally {
      this.internalDepth--;
    }
  }

  private scalar(stmt: StatementSync): number {
    const row = this.internal(() => stmt.get()) as unknown as unknown[] | undefined;
    return Number(row?.[0]);
  }

  /** Compiles user SQL once per distinct text (LRU cache), refusing anything but exactly one statement. */
  private prepare(sql: string, label: string): Prepared {
    const hit = this.cache.get(sql);
    if (hit !== undefined) {
      this.cache.delete(sql);
      this.cache.set(sql, hit);
      return hit;
    }
    const count = countStatements(sql);
    if (count === 0) throw new ApiError('sql_error', `${label}sql holds no statement`);
    if (count > 1) {
      throw new ApiError('sql_error', `${label}sql holds ${count} statements: send one per "sql", or several as {"statements":[...]}`);
    }
    const capture: Capture = { actions: 0, write: false, ddl: false, dml: false, insert: false };
    this.capture = capture;
    this.denial = null;
    let stmt: StatementSync;
    try {
      stmt = this.db.prepare(sql);
    } catch (err) {
      throw sqlFailure(err, this.denial, label);
    } finally {
      this.capture = null;
    }
    // VACUUM compiles without asking the authorizer anything, so it is recognised by its keyword: it
    // cannot run inside the engine's transaction, and VACUUM INTO would write outside the data
    // directory (the serving connection's ATTACH limit of 0 stops that too). Any other statement the
    // authorizer never saw (REINDEX with no index) is treated as a write.
    if (capture.actions === 0 && VACUUM.test(sql)) {
      throw new ApiError('sql_error', `${label}VACUUM is not supported: the engine owns the database file`);
    }
    stmt.setReadBigInts(true);
    stmt.setReturnArrays(true);
    const prepared: Prepared = {
      stmt,
      readOnly: capture.actions > 0 && !capture.write,
      returnsRows: stmt.columns().length > 0,
      dml: capture.dml && !capture.ddl,
      insert: capture.insert && capture.dml && !capture.ddl,
      columns: [],
      columnsGeneration: -1,
    };
    this.cache.set(sql, prepared);
    if (this.cache.size > STATEMENT_CACHE_SIZE) {
      const oldest = this.cache.keys().next().value as string;
      this.cache.delete(oldest);
    }
    return prepared;
  }

  private columnNames(p: Prepared): string[] {
    if (p.columnsGeneration !== this.schemaGeneration) {
      p.columns = p.stmt.columns().map((c) => c.name);
      p.columnsGeneration = this.schemaGeneration;
    }
    return p.columns;
  }

  private begin(): Transaction {
    this.internal(() => this.beginStmt.run());
    return { changesBefore: this.scalar(this.totalChangesStmt), schemaChanges: 0 };
  }

  private rollback(): void {
    if (this.db.isTransaction) this.internal(() => this.rollbackStmt.run());
  }

  /** Commits, first recording the figures in the same transaction when anything changed. */
  private commit(tx: Transaction): void {
    const changed = tx.schemaChanges > 0 || this.scalar(this.totalChangesStmt) !== tx.changesBefore;
    if (!changed) {
      this.internal(() => this.commitStmt.run());
      return;
    }
    const prev = this.figures;
    const next: LineageFigures = {
      directory_lineage: prev.directory_lineage,
      visible_csn: prev.visible_csn + 1,
      catalog_version: prev.catalog_version + tx.schemaChanges,
      // Monotonic even when the wall clock steps back (docs/engine.md "Lineage figures").
      logical_time_micros: Math.max(prev.logical_time_micros + 1, Date.now() * 1000),
    };
    this.internal(() => {
      this.updateMetaStmt.run(next.visible_csn, next.catalog_version, next.logical_time_micros);
      this.beforeCommit();
      this.commitStmt.run();
    });
    this.figures = next;
  }

  private runOne(p: Prepared, params: Params | undefined, tx: Transaction | null, field: string, label: string): StatementResult {
    const args = bindParams(params, `${field}params`);
    const schemaBefore = tx === null ? 0 : this.scalar(this.schemaVersionStmt);
    this.denial = null;
    let rows: unknown[][] = [];
    let changes = 0;
    let rowid: unknown = null;
    try {
      if (p.returnsRows) {
        rows = convertRows(all(p.stmt, args));
        if (p.dml) {
          const row = this.internal(() => this.changesStmt.get()) as unknown as [bigint, bigint];
          changes = Number(row[0]);
          rowid = row[1];
        }
      } else {
        const r = run(p.stmt, args);
        changes = Number(r.changes);
        rowid = r.lastInsertRowid;
      }
    } catch (err) {
      throw sqlFailure(err, this.denial, label);
    }
    if (tx !== null && this.scalar(this.schemaVersionStmt) !== schemaBefore) {
      tx.schemaChanges++;
      this.schemaGeneration++;
    }
    return {
      columns: p.returnsRows ? this.columnNames(p) : [],
      rows,
      rows_changed: p.dml ? changes : 0,
      last_insert_rowid: p.insert ? (toJsonValue(rowid as bigint) as number | string) : null,
    };
  }

  /**
   * Runs the statements in order; the first one that writes opens a transaction that the rest join and
   * that commits after the last one. Any failure rolls it all back and throws (400 sql_error).
   */
  execute(statements: StatementInput[]): SqlResponse {
    const results: StatementResult[] = [];
    let tx: Transaction | null = null;
    try {
      for (let i = 0; i < statements.length; i++) {
        const input = statements[i] as StatementInput;
        const field = statements.length > 1 ? `statements[${i}].` : '';
        const label = statements.length > 1 ? `statements[${i}]: ` : '';
        const p = this.prepare(input.sql, label);
        if (!p.readOnly && tx === null) tx = this.begin();
        results.push(this.runOne(p, input.params, tx, field, label));
      }
      if (tx !== null) {
        try {
          this.commit(tx);
        } catch (err) {
          throw sqlFailure(err, null, 'commit: ');
        }
      }
    } catch (err) {
      if (tx !== null) this.rollback();
      throw err;
    }
    return { results, visible_csn: this.figures.visible_csn };
  }

  /** The stored name and CREATE statement of a user table (case-insensitive), or null. */
  private findTable(name: string): { name: string; sql: string } | null {
    if (!IDENTIFIER.test(name)) throw new ApiError('bad_request', 'table must be an identifier: a letter or _, then letters, digits or _ (at most 128)');
    if (isMeta(name) || name.toLowerCase().startsWith('sqlite_')) return null;
    const row = this.internal(() => this.tableLookupStmt.get(name)) as { name: string; sql: string | null } | undefined;
    return row ? { name: row.name, sql: row.sql ?? '' } : null;
  }

  /** Drops a user table: a write and a schema change. Unknown → 404 not_found. */
  dropTable(name: string): { dropped: string; visible_csn: number; catalog_version: number } {
    const table = this.findTable(name);
    if (table === null) throw new ApiError('not_found', `no table named ${name}`);
    this.execute([{ sql: `DROP TABLE "${table.name}"` }]);
    return { dropped: table.name, visible_csn: this.figures.visible_csn, catalog_version: this.figures.catalog_version };
  }

  /** FTS5 MATCH over a virtual table, best bm25 rank first. Unknown or non-FTS5 table → 404. */
  search(tableName: string, query: string, limit: number): { hits: SearchHit[] } {
    const table = this.findTable(tableName);
    if (table === null || !/\busing\s+fts5\b/i.test(table.sql)) {
      throw new ApiError('not_found', `no FTS5 table named ${tableName}`);
    }
    const q = `"${table.name}"`;
    // `rank` is FTS5's bm25() unless the table configured other weights, and sorting by it lets FTS5
    // order hits itself.
    const sql = `SELECT rowid, rank, snippet(${q}, -1, '<b>', '</b>', '…', 16), * FROM ${q} WHERE ${q} MATCH ? ORDER BY rank LIMIT ?`;
    let p: Prepared;
    try {
      p = this.prepare(sql, '');
    } catch (err) {
      throw sqlFailure(err, null, '', 'bad_query');
    }
    let rows: unknown[][];
    try {
      rows = convertRows(p.stmt.all(query, BigInt(limit)));
    } catch (err) {
      throw sqlFailure(err, null, '', 'bad_query');
    }
    const names = this.columnNames(p);
    const hits = rows.map((row) => {
      const hit: SearchHit = { rowid: row[0], rank: row[1], snippet: row[2] };
      for (let i = 3; i < row.length; i++) {
        const name = names[i] as string;
        if (!(name in hit)) hit[name] = row[i];
      }
      return hit;
    });
    return { hits };
  }

  /** Checkpoints the WAL into the database file (TRUNCATE) and closes the connection. */
  close(): void {
    if (!this.db.isOpen) return;
    this.internal(() => {
      this.rollback();
      checkpointTruncate(this.db);
    });
    this.db.close();
  }
}
