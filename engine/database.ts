/**
 * Opening the SQLite database of a data directory, and the lineage figures kept inside it
 * (docs/engine.md "Lineage figures"). The figures live in the one-row table `_svc_meta`, in the
 * same file as the user's data, so a write and its figures commit together and travel together
 * through backup and restore.
 */
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { EngineCliError } from './exit-codes.ts';

/** The engine's own table; user SQL may read it but never change it (executor.ts authorizer). */
export const META_TABLE = '_svc_meta';

/** The lineage figures of a data directory. */
export interface LineageFigures {
  directory_lineage: string;
  visible_csn: number;
  catalog_version: number;
  logical_time_micros: number;
}

/** Options for {@link openDatabase}. */
export interface OpenOptions {
  /** The serving connection: no ATTACH (VACUUM INTO included), a bigger page cache. */
  serving?: boolean;
}

/**
 * Opens (or creates) the database at `path` read-write in WAL mode with synchronous=FULL, so that a
 * commit that returned has been fsynced to the WAL and survives the process being killed.
 */
export function openDatabase(path: string, options: OpenOptions = {}): DatabaseSync {
  const db = new DatabaseSync(path, {
    timeout: 0, // the directory lock makes this connection the only one; waiting would hide a bug
    enableForeignKeyConstraints: true,
    allowExtension: false,
    defensive: true, // no writable_schema tricks that could corrupt the file
    ...(options.serving ? { limits: { attach: 0 } } : {}),
  });
  try {
    const mode = db.prepare('PRAGMA journal_mode = WAL').get() as { journal_mode?: string } | undefined;
    if (mode?.journal_mode !== 'wal') throw new Error(`could not switch ${path} to WAL mode`);
    db.exec('PRAGMA synchronous = FULL; PRAGMA trusted_schema = OFF;');
    if (options.serving) db.exec('PRAGMA cache_size = -32768; PRAGMA temp_store = MEMORY;');
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

/**
 * Opens a database file read-only and `immutable` (no locks, no -wal/-shm created, no byte of the file
 * touched): for checking copies in a backup or a staging directory, whose digests must not change.
 */
export function openImmutable(path: string): DatabaseSync {
  const url = pathToFileURL(path);
  url.searchParams.set('immutable', '1');
  return new DatabaseSync(url, { readOnly: true, timeout: 0, allowExtension: false });
}

/** Creates the meta table and its one row for a new data directory. */
export function createMetaTable(db: DatabaseSync, lineage: string): void {
  db.exec(`CREATE TABLE ${META_TABLE} (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    directory_lineage TEXT NOT NULL,
    visible_csn INTEGER NOT NULL,
    catalog_version INTEGER NOT NULL,
    logical_time_micros INTEGER NOT NULL
  ) STRICT`);
  db.prepare(`INSERT INTO ${META_TABLE} VALUES (1, ?, 0, 0, 0)`).run(lineage);
}

/** Reads the lineage figures; a database without them is damaged (internal, exit 1). */
export function readFigures(db: DatabaseSync): LineageFigures {
  let row: Record<string, unknown> | undefined;
  try {
    row = db
      .prepare(`SELECT directory_lineage, visible_csn, catalog_version, logical_time_micros FROM ${META_TABLE} WHERE id = 1`)
      .get();
  } catch (err) {
    throw new EngineCliError('internal', `database has no lineage figures: ${(err as Error).message}`, { cause: err });
  }
  if (!row) throw new EngineCliError('internal', 'database has no lineage figures row');
  return {
    directory_lineage: String(row.directory_lineage),
    visible_csn: Number(row.visible_csn),
    catalog_version: Number(row.catalog_version),
    logical_time_micros: Number(row.logical_time_micros),
  };
}

/**
 * Moves every committed page from the WAL into the database file and truncates the WAL, so the file
 * alone holds the state its digest stands for. Throws when a reader blocked part of it.
 */
export function checkpointTruncate(db: DatabaseSync): void {
  const row = db.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get() as { busy?: number } | undefined;
  if (row?.busy !== 0) throw new Error('WAL checkpoint was blocked');
}

/** `PRAGMA integrity_check` findings; empty when the database is sound. */
export function integrityProblems(db: DatabaseSync): string[] {
  const rows = db.prepare('PRAGMA integrity_check').all() as Array<{ integrity_check?: unknown }>;
  const findings = rows.map((r) => String(r.integrity_check));
  return findings.length === 1 && findings[0] === 'ok' ? [] : findings;
}
