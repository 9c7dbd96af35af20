/** The one-shot CLI commands `version`, `init` and `status` (docs/engine.md "CLI"). */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { checkpointTruncate, createMetaTable, openDatabase, readFigures } from './database.ts';
import type { LineageFigures } from './database.ts';
import { EngineCliError } from './exit-codes.ts';
import { digestFile, fsyncPath, pathState, randomHex, removeQuietly, stagingPathFor } from './fs-util.ts';
import { DATA_FORMAT, DB_FILE, META_FILE, dataPaths, requireInitialized } from './layout.ts';
import type { DataPaths, MetaFile } from './layout.ts';
import { acquireDirectoryLock } from './lock.ts';
import { ENGINE_VERSION, PRODUCT, PROTOCOL_MINOR } from './version.ts';

/** `version --json`. */
export function versionCommand(): Record<string, unknown> {
  return {
    engine_version: ENGINE_VERSION,
    protocol_minor: PROTOCOL_MINOR,
    product: PRODUCT,
    storage: 'sqlite',
    node: process.version,
  };
}

/**
 * Moves a fully built staging directory to `target` in one rename. rename(2) replaces an empty
 * directory and fails on a non-empty one, so a target that filled up meanwhile is never overwritten.
 */
export function activate(staging: string, target: string): void {
  try {
    renameSync(staging, target);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTEMPTY' || code === 'EEXIST' || code === 'ENOTDIR' || code === 'EISDIR') {
      throw new EngineCliError('target_exists', `${target} already exists and is not empty`);
    }
    throw err;
  }
  fsyncPath(dirname(target));
}

/** Refuses a target that exists and is not an empty directory (exit 6). */
export function requireFreeTarget(target: string): void {
  if (pathState(target) === 'occupied') throw new EngineCliError('target_exists', `${target} already exists and is not empty`);
}

/**
 * `init --data-dir D`: builds the data directory in a staging sibling and renames it into place, so a
 * crash mid-init leaves D absent (and init can simply run again), never half made.
 */
export function initCommand(dataDir: string): Record<string, unknown> {
  const paths = dataPaths(dataDir);
  requireFreeTarget(paths.dir);
  mkdirSync(dirname(paths.dir), { recursive: true });
  const staging = stagingPathFor(paths.dir);
  mkdirSync(staging);
  const lineage = `lin_${randomHex(16)}`;
  try {
    const db = openDatabase(join(staging, DB_FILE));
    try {
      createMetaTable(db, lineage);
      checkpointTruncate(db);
    } finally {
      db.close();
    }
    const meta: MetaFile = {
      format: DATA_FORMAT,
      directory_lineage: lineage,
      engine_version: ENGINE_VERSION,
      created_at: new Date().toISOString(),
    };
    writeFileSync(join(staging, META_FILE), `${JSON.stringify(meta, null, 2)}\n`);
    fsyncPath(join(staging, DB_FILE));
    fsyncPath(join(staging, META_FILE));
    fsyncPath(staging);
    activate(staging, paths.dir);
  } catch (err) {
    removeQuietly(staging);
    throw err;
  }
  return { status: 'initialized', data_dir: paths.dir, directory_lineage: lineage, visible_csn: 0, catalog_version: 0 };
}

/**
 * Opens the database (recovering a WAL left by a killed serve), checkpoints it into the main file,
 * reads the figures and closes it. The caller holds the directory lock, so afterwards the file alone is
 * the state and nothing changes it until the lock is released.
 */
export function checkpointedFigures(paths: DataPaths, meta: MetaFile): LineageFigures {
  const db = openDatabase(paths.db);
  let figures: LineageFigures;
  try {
    checkpointTruncate(db);
    figures = readFigures(db);
  } finally {
    db.close();
  }
  if (figures.directory_lineage !== meta.directory_lineage) {
    throw new EngineCliError('internal', `${paths.dir} is damaged: ${META_FILE} and the database name different lineages`);
  }
  return figures;
}

/** `status --data-dir D`: the lineage figures and the digest of the checkpointed database file. */
export function statusCommand(dataDir: string): Record<string, unknown> {
  const { paths, meta } = requireInitialized(dataDir);
  const lock = acquireDirectoryLock(paths.dir, 'status');
  try {
    const figures = checkpointedFigures(paths, meta);
    // Hashed after close(): reading the file while this process had it open through SQLite would drop
    // SQLite's POSIX locks on it when our descriptor closed.
    const { sha256 } = digestFile(paths.db);
    return {
      visible_csn: figures.visible_csn,
      root_digest: sha256,
      directory_lineage: figures.directory_lineage,
      catalog_version: figures.catalog_version,
      logical_time_micros: figures.logical_time_micros,
    };
  } finally {
    lock.release();
  }
}
