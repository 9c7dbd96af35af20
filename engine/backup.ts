/**
 * `backup`, `verify` and `restore` (docs/engine.md "CLI", "Directory layout").
 *
 * A backup directory holds a byte copy of the checkpointed database, the meta file, and manifest.json
 * (each file's size and SHA-256, plus the lineage figures). The copy is taken under the directory
 * lock after a TRUNCATE checkpoint, so the database file alone is the whole state and no writer can
 * exist; the copy is therefore byte-identical to the file `status` digests, and `checkpoint_digest`
 * equals `root_digest` of the same state. Every directory this module creates is built in a staging
 * sibling and renamed into place, so a crash never leaves a half-made backup or target behind.
 */
import { copyFileSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { integrityProblems, openImmutable, readFigures } from './database.ts';
import type { LineageFigures } from './database.ts';
import { activate, checkpointedFigures, requireFreeTarget } from './commands.ts';
import { EngineCliError } from './exit-codes.ts';
import { digestFile, fsyncPath, pathState, removeQuietly, stagingPathFor } from './fs-util.ts';
import { BACKUP_FORMAT, DB_FILE, LINEAGE_PATTERN, LOCK_FILE, MANIFEST_FILE, META_FILE, parseMeta, requireInitialized } from './layout.ts';
import { acquireDirectoryLock } from './lock.ts';
import { ENGINE_VERSION } from './version.ts';

/** One file listed in a manifest. */
export interface ManifestEntry {
  path: string;
  size: number;
  sha256: string;
}

/** manifest.json of a backup directory. */
export interface Manifest extends LineageFigures {
  format: typeof BACKUP_FORMAT;
  engine_version: string;
  created_at: string;
  checkpoint_digest: string;
  files: ManifestEntry[];
}

/** What a successful verification established. */
export interface VerifiedBackup {
  dir: string;
  manifest: Manifest;
  fileCount: number;
  totalBytes: number;
}

/** The files a backup carries, in manifest order. Nothing else is ever copied out of a backup. */
const BACKUP_FILES = [DB_FILE, META_FILE] as const;
const SHA256_HEX = /^[0-9a-f]{64}$/;

function corrupt(dir: string, why: string): EngineCliError {
  return new EngineCliError('corrupt_backup', `backup ${dir} failed verification: ${why}`);
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** Reads and shape-checks manifest.json; anything off is corrupt_backup. */
function readManifest(dir: string): Manifest {
  let text: string;
  try {
    text = readFileSync(join(dir, MANIFEST_FILE), 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw corrupt(dir, pathState(dir) === 'absent' ? 'it does not exist' : `${MANIFEST_FILE} is missing`);
    }
    throw err;
  }
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw corrupt(dir, `${MANIFEST_FILE} is not JSON`);
  }
  if (typeof m !== 'object' || m === null || m.format !== BACKUP_FORMAT) throw corrupt(dir, `${MANIFEST_FILE} is not a ${BACKUP_FORMAT} manifest`);
  if (typeof m.directory_lineage !== 'string' || !LINEAGE_PATTERN.test(m.directory_lineage)) throw corrupt(dir, 'manifest lineage is malformed');
  if (!isCount(m.visible_csn) || !isCount(m.catalog_version) || !isCount(m.logical_time_micros)) {
    throw corrupt(dir, 'manifest figures are malformed');
  }
  if (typeof m.checkpoint_digest !== 'string' || !SHA256_HEX.test(m.checkpoint_digest)) throw corrupt(dir, 'manifest checkpoint_digest is malformed');
  const files = m.files;
  if (!Array.isArray(files) || files.length !== BACKUP_FILES.length) throw corrupt(dir, `manifest must list ${BACKUP_FILES.join(' and ')}`);
  BACKUP_FILES.forEach((name, i) => {
    const f = files[i] as Record<string, unknown> | null;
    if (typeof f !== 'object' || f === null || f.path !== name || !isCount(f.size) || typeof f.sha256 !== 'string' || !SHA256_HEX.test(f.sha256)) {
      throw corrupt(dir, `manifest entry ${i} is not a valid entry for ${name}`);
    }
  });
  return m as unknown as Manifest;
}

/** Re-reads every file in `dir` listed by the manifest and compares size and SHA-256. */
function checkDigests(dir: string, manifest: Manifest): void {
  for (const entry of manifest.files) {
    let actual;
    try {
      actual = digestFile(join(dir, entry.path));
    } catch (err) {
      throw corrupt(dir, `${entry.path} cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    }
    if (actual.size !== entry.size) throw corrupt(dir, `${entry.path} is ${actual.size} bytes, the manifest says ${entry.size}`);
    if (actual.sha256 !== entry.sha256) throw corrupt(dir, `${entry.path} does not match its SHA-256 in the manifest`);
  }
}

/** Opens the database copy without touching it and runs PRAGMA integrity_check; checks its figures. */
function checkDatabase(dir: string, manifest: Manifest): void {
  let db;
  try {
    db = openImmutable(join(dir, DB_FILE));
  } catch (err) {
    throw corrupt(dir, `${DB_FILE} cannot be opened: ${(err as Error).message}`);
  }
  try {
    let problems: string[];
    let figures: LineageFigures;
    try {
      problems = integrityProblems(db);
      figures = readFigures(db);
    } catch (err) {
      throw corrupt(dir, `${DB_FILE} cannot be read: ${(err as Error).message}`);
    }
    if (problems.length > 0) throw corrupt(dir, `integrity_check: ${problems.slice(0, 3).join('; ')}`);
    if (figures.directory_lineage !== manifest.directory_lineage || figures.visible_csn !== manifest.visible_csn) {
      throw corrupt(dir, 'the database figures differ from the manifest');
    }
  } finally {
    db.close();
  }
}

/** Verifies a backup directory: manifest, every digest, the meta file, and the database's integrity. */
export function verifyBackupDir(dirArg: string): VerifiedBackup {
  const dir = resolve(dirArg);
  const manifest = readManifest(dir);
  checkDigests(dir, manifest);
  const dbEntry = manifest.files[0] as ManifestEntry;
  if (dbEntry.sha256 !== manifest.checkpoint_digest) throw corrupt(dir, 'checkpoint_digest is not the digest of the database file');
  const meta = parseMeta(readFileSync(join(dir, META_FILE), 'utf8'));
  if (!meta || meta.directory_lineage !== manifest.directory_lineage) throw corrupt(dir, `${META_FILE} does not match the manifest lineage`);
  checkDatabase(dir, manifest);
  return {
    dir,
    manifest,
    fileCount: manifest.files.length,
    totalBytes: manifest.files.reduce((sum, f) => sum + f.size, 0),
  };
}

/** `verify --backup B`: the same verification backup and restore run. */
export function verifyCommand(backupDir: string): Record<string, unknown> {
  const v = verifyBackupDir(backupDir);
  return {
    status: 'verified',
    backup_path: v.dir,
    checkpoint_digest: v.manifest.checkpoint_digest,
    file_count: v.fileCount,
    total_bytes: v.totalBytes,
    visible_csn: v.manifest.visible_csn,
    directory_lineage: v.manifest.directory_lineage,
  };
}

function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/** `backup --data-dir D --out B`: a verified copy of D's checkpointed state in the new directory B. */
export function backupCommand(dataDir: string, out: string): Record<string, unknown> {
  const { paths, meta } = requireInitialized(dataDir);
  const target = resolve(out);
  if (isInside(paths.dir, target)) throw new EngineCliError('bad_arguments', '--out must be outside the data directory');
  requireFreeTarget(target);
  const lock = acquireDirectoryLock(paths.dir, 'backup');
  let staging: string | null = null;
  try {
    const figures = checkpointedFigures(paths, meta);
    const entries: ManifestEntry[] = BACKUP_FILES.map((name) => ({ path: name, ...digestFile(join(paths.dir, name)) }));
    const checkpointDigest = (entries[0] as ManifestEntry).sha256;
    mkdirSync(dirname(target), { recursive: true });
    staging = stagingPathFor(target);
    mkdirSync(staging);
    for (const name of BACKUP_FILES) copyFileSync(join(paths.dir, name), join(staging, name));
    const manifest: Manifest = {
      format: BACKUP_FORMAT,
      engine_version: ENGINE_VERSION,
      created_at: new Date().toISOString(),
      directory_lineage: figures.directory_lineage,
      visible_csn: figures.visible_csn,
      catalog_version: figures.catalog_version,
      logical_time_micros: figures.logical_time_micros,
      checkpoint_digest: checkpointDigest,
      files: entries,
    };
    writeFileSync(join(staging, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
    for (const name of [...BACKUP_FILES, MANIFEST_FILE]) fsyncPath(join(staging, name));
    fsyncPath(staging);
    // The digests in the manifest were taken from the source; verification re-reads the copies.
    const verified = verifyBackupDir(staging);
    activate(staging, target);
    staging = null;
    return {
      backup_path: target,
      checkpoint_digest: checkpointDigest,
      file_count: verified.fileCount,
      total_bytes: verified.totalBytes,
      status: 'verified',
      visible_csn: figures.visible_csn,
      directory_lineage: figures.directory_lineage,
    };
  } finally {
    if (staging !== null) removeQuietly(staging);
    lock.release();
  }
}

/**
 * Refuses an occupied restore target: lock_held when a live process holds its directory lock (it is
 * a served data directory), else target_exists. Probing the lock writes nothing into the target.
 */
function refuseOccupiedTarget(target: string): never {
  let exists = false;
  try {
    exists = statSync(join(target, LOCK_FILE)).isFile();
  } catch {
    exists = false;
  }
  if (exists) acquireDirectoryLock(target, 'restore', { writeHolder: false }).release();
  throw new EngineCliError('target_exists', `${target} already exists and is not empty`);
}

/**
 * `restore --backup B --target T`: verifies B, copies it into a staging sibling of T (under that
 * directory's lock), re-checks digests and integrity there, then renames it to T. Nothing outside
 * T and its staging sibling is written; B is only read.
 */
export function restoreCommand(backupDir: string, targetDir: string): Record<string, unknown> {
  const source = resolve(backupDir);
  const target = resolve(targetDir);
  const verified = verifyBackupDir(source);
  if (pathState(target) === 'occupied') refuseOccupiedTarget(target);
  mkdirSync(dirname(target), { recursive: true });
  let staging: string | null = stagingPathFor(target);
  mkdirSync(staging);
  let lock = null;
  try {
    lock = acquireDirectoryLock(staging, 'restore', { writeHolder: false });
    for (const name of BACKUP_FILES) copyFileSync(join(source, name), join(staging, name));
    checkDigests(staging, verified.manifest);
    checkDatabase(staging, verified.manifest);
    for (const name of BACKUP_FILES) fsyncPath(join(staging, name));
    fsyncPath(staging);
    activate(staging, target);
    staging = null;
  } finally {
    lock?.release();
    if (staging !== null) removeQuietly(staging);
  }
  return {
    status: 'restored',
    target,
    backup_path: source,
    checkpoint_digest: verified.manifest.checkpoint_digest,
    visible_csn: verified.manifest.visible_csn,
    directory_lineage: verified.manifest.directory_lineage,
  };
}
