/**
 * The off-machine backup store (docs/lifecycle.md "Off-machine copies"): where every snapshot's
 * backup directory is copied so that it outlives its engine machine. With the `s3` blob backend it
 * is the deployment's bucket (./s3-store.ts), with `fs` the directory `SVCD_BACKUP_DIR` (./fs-store.ts,
 * a mounted network volume in production); an `fs` agent without it has none.
 *
 * Every store keeps one rule: a copy is complete only once every file was checked against the
 * manifest (sizes and SHA-256), and it says so LAST (the `s3` marker, the `fs` rename), so a crash at
 * any point leaves no copy or a complete one, never one that claims to be complete.
 */
import type { Readable } from 'node:stream';
import type { Settings } from '../../shared/config.ts';
import { createFsBackupStore } from './fs-store.ts';
import { createS3BackupStore } from './s3-store.ts';

/** A store of off-machine copies of backup directories, keyed by project and snapshot. */
export interface BackupStore {
  readonly kind: 's3' | 'fs';
  /** Copies the backup directory `backupDir`, checks the copy against its manifest, then marks it complete. Idempotent. */
  put(projectId: string, snapshotId: string, backupDir: string): Promise<void>;
  /** Whether the store holds a complete copy. */
  isComplete(projectId: string, snapshotId: string): Promise<boolean>;
  /**
   * Downloads a complete copy into `intoDir` (which must not exist), checked against its manifest
   * unless `check` is false (the engine verifies it next, as its restore does); 404 when there is none.
   */
  fetch(projectId: string, snapshotId: string, intoDir: string, check?: boolean): Promise<void>;
  /** A file of a complete copy as a stream, with its size; null when there is no complete copy. */
  read(projectId: string, snapshotId: string, file: string): Promise<{ body: Readable; size: number } | null>;
  /** Removes the copy, complete or partial: its completion first, then its files. Idempotent. */
  remove(projectId: string, snapshotId: string): Promise<void>;
  /** Snapshot ids of which the store holds anything (complete or not) for the project. */
  list(projectId: string): Promise<string[]>;
  /** Removes every copy of a deleted project (each through `remove`); answers how many there were. */
  removeProject(projectId: string): Promise<number>;
}

/** What opening a store needs besides the settings. */
export interface BackupStoreDeps {
  log: (line: string) => void;
  now: () => number;
}

/** The settings the stores read. */
export type BackupSettings = Pick<
  Settings,
  | 'SVCD_BLOB_BACKEND'
  | 'SVCD_BACKUP_DIR'
  | 'SVCD_S3_ENDPOINT'
  | 'SVCD_S3_REGION'
  | 'SVCD_S3_BUCKET'
  | 'SVCD_S3_FORCE_PATH_STYLE'
  | 'SVCD_S3_ACCESS_KEY_ID'
  | 'SVCD_S3_SECRET_ACCESS_KEY'
>;

/**
 * The deployment's store: the bucket with `s3`, `SVCD_BACKUP_DIR` with `fs`; null (no off-machine
 * copies) for `fs` without it, which the agent states loudly at start. `cwd` resolves a relative directory.
 */
export function openBackupStore(settings: BackupSettings, deps: BackupStoreDeps, cwd: string = process.cwd()): BackupStore | null {
  if (settings.SVCD_BLOB_BACKEND === 's3') return createS3BackupStore(settings, deps);
  if (settings.SVCD_BACKUP_DIR) return createFsBackupStore(settings.SVCD_BACKUP_DIR, cwd, deps);
  return null;
}

/**
 * Removes every off-machine copy of a deleted project (docs/lifecycle.md "Deleting a project");
 * answers how many there were. Nothing to do without a store.
 */
export async function removeProjectBackups(settings: BackupSettings, projectId: string, log: (line: string) => void): Promise<number> {
  const store = openBackupStore(settings, { log, now: Date.now });
  return store ? store.removeProject(projectId) : 0;
}
