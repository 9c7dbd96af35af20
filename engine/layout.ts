/**
 * The files of a data directory and of a backup directory (docs/engine.md "Directory layout").
 *
 *   <data dir>/meta.json       lineage id and format, written once by init (the "initialized" marker)
 *   <data dir>/data.sqlite     the database (WAL mode; -wal and -shm beside it while open)
 *   <data dir>/lock            empty file; SQLite's advisory lock on it is the directory lock (lock.ts)
 *   <data dir>/lock-holder.json  who holds the lock, for error messages only
 *   <backup>/manifest.json     every copied file with its size and SHA-256, plus the lineage figures
 */
import { readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { EngineCliError } from './exit-codes.ts';

export const DB_FILE = 'data.sqlite';
export const META_FILE = 'meta.json';
export const LOCK_FILE = 'lock';
export const LOCK_HOLDER_FILE = 'lock-holder.json';
export const MANIFEST_FILE = 'manifest.json';
export const DATA_FORMAT = 'svc-engine-data/1';
export const BACKUP_FORMAT = 'svc-engine-backup/1';

/** The content of meta.json. */
export interface MetaFile {
  format: typeof DATA_FORMAT;
  directory_lineage: string;
  engine_version: string;
  created_at: string;
}

/** Absolute paths of a data directory's files. */
export interface DataPaths {
  dir: string;
  db: string;
  meta: string;
  lock: string;
  lockHolder: string;
}

/** The paths of the data directory `dir` (resolved to an absolute path). */
export function dataPaths(dir: string): DataPaths {
  const abs = resolve(dir);
  return {
    dir: abs,
    db: join(abs, DB_FILE),
    meta: join(abs, META_FILE),
    lock: join(abs, LOCK_FILE),
    lockHolder: join(abs, LOCK_HOLDER_FILE),
  };
}

/** A lineage id: `lin_` + 32 hex characters. */
export const LINEAGE_PATTERN = /^lin_[0-9a-f]{32}$/;

/** Parses meta.json text; null when it is not a meta file of this format. */
export function parseMeta(text: string): MetaFile | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const meta = value as Record<string, unknown>;
  if (meta.format !== DATA_FORMAT) return null;
  if (typeof meta.directory_lineage !== 'string' || !LINEAGE_PATTERN.test(meta.directory_lineage)) return null;
  return value as MetaFile;
}

/**
 * Checks that `dir` is a data directory made by init and returns its paths and meta file.
 * Missing directory, meta file or database → not_initialized (exit 4); an unreadable meta file is
 * damage, not absence → internal (exit 1).
 */
export function requireInitialized(dir: string): { paths: DataPaths; meta: MetaFile } {
  const paths = dataPaths(dir);
  let text: string;
  try {
    text = readFileSync(paths.meta, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') {
      throw new EngineCliError('not_initialized', `${paths.dir} is not an initialized data directory (no ${META_FILE}); run init first`);
    }
    throw err;
  }
  const meta = parseMeta(text);
  if (!meta) throw new EngineCliError('internal', `${paths.meta} is damaged: not a ${DATA_FORMAT} meta file`);
  try {
    statSync(paths.db);
  } catch {
    throw new EngineCliError('not_initialized', `${paths.dir} has no database file ${DB_FILE}; run init first`);
  }
  return { paths, meta };
}
