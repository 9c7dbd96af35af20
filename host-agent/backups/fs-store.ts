/**
 * The `fs` off-machine store (docs/lifecycle.md "Off-machine copies"): `SVCD_BACKUP_DIR`, a directory
 * that is not the engine machine's disk in production (a mounted network volume; in the local stack
 * `<state dir>/backups`).
 *
 *   <dir>/<project>/<snapshot_id>/                   a complete copy (data.sqlite, meta.json, manifest.json)
 *   <dir>/<project>/.staging-<snapshot_id>-<hex>/    a copy being made: files copied, fsynced, checked
 *   <dir>/<project>/.removing-<snapshot_id>-<hex>/   a copy being removed
 *
 * The rename of the staging directory to its snapshot id is the completion: a crash before it leaves
 * only a staging name (never read as a copy, removed by the next put or remove of that snapshot), a
 * crash after it a complete copy. Removal renames the copy out of its name first.
 */
import { createReadStream } from 'node:fs';
import { copyFile, mkdir, open, readdir, rename, rm, rmdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { errors } from '../../shared/errors.ts';
import { ID_PATTERNS, randomHex } from '../../shared/ids.ts';
import { checkDir, MANIFEST, readManifest } from './manifest.ts';
import type { BackupStore, BackupStoreDeps } from './store.ts';

const STAGING = '.staging-';
const REMOVING = '.removing-';

/** The `fs` store under `dir` (resolved against `cwd`). */
export function createFsBackupStore(dir: string, cwd: string, deps: BackupStoreDeps): BackupStore {
  return new FsBackupStore(resolve(cwd, dir), deps);
}

async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/** Copies the manifest's files and the manifest from `from` to `to` (made here), each fsynced, then checks `to` (unless `check` is false). */
export async function copyBackupDir(from: string, to: string, where: string, check = true): Promise<void> {
  const manifest = await readManifest(from);
  await mkdir(to, { recursive: false, mode: 0o700 });
  for (const name of [...manifest.files.map((f) => f.path), MANIFEST]) {
    await copyFile(join(from, name), join(to, name));
    await fsyncPath(join(to, name));
  }
  if (check) {
    const copied = await checkDir(to, where);
    if (!copied.bytes.equals(manifest.bytes)) throw errors.conflict(`${where}: the copied manifest differs from the backup's`);
  }
  await fsyncPath(to);
}

class FsBackupStore implements BackupStore {
  readonly kind = 'fs' as const;
  readonly #dir: string;
  readonly #deps: BackupStoreDeps;

  constructor(dir: string, deps: BackupStoreDeps) {
    this.#dir = dir;
    this.#deps = deps;
  }

  #projectDir(projectId: string): string {
    if (!ID_PATTERNS.prj.test(projectId)) throw errors.invalid(`not a project id: ${projectId}`);
    return join(this.#dir, projectId);
  }

  #copyDir(projectId: string, snapshotId: string): string {
    if (!ID_PATTERNS.snap.test(snapshotId)) throw errors.invalid(`not a snapshot id: ${snapshotId}`);
    return join(this.#projectDir(projectId), snapshotId);
  }

  async put(projectId: string, snapshotId: string, backupDir: string): Promise<void> {
    const final = this.#copyDir(projectId, snapshotId);
    if (await exists(final)) return;
    const parent = this.#projectDir(projectId);
    await mkdir(parent, { recursive: true, mode: 0o700 });
    await this.#clearStale(projectId, snapshotId, [STAGING]);
    const staging = join(parent, `${STAGING}${snapshotId}-${randomHex(8)}`);
    try {
      await copyBackupDir(backupDir, staging, `the off-machine copy of ${snapshotId}`);
      await rename(staging, final);
      await fsyncPath(parent);
    } catch (err) {
      await rm(staging, { recursive: true, force: true }).catch(() => {});
      // Another put of the same snapshot completed first: the copy is there, complete.
      if ((err as NodeJS.ErrnoException).code === 'ENOTEMPTY' || (err as NodeJS.ErrnoException).code === 'EEXIST') {
        if (await exists(final)) return;
      }
      throw err;
    }
  }

  async isComplete(projectId: string, snapshotId: string): Promise<boolean> {
    return exists(join(this.#copyDir(projectId, snapshotId), MANIFEST));
  }

  async fetch(projectId: string, snapshotId: string, intoDir: string, check = true): Promise<void> {
    const final = this.#copyDir(projectId, snapshotId);
    if (!(await exists(final))) throw errors.notFound(`no off-machine copy of snapshot ${snapshotId}`);
    try {
      await copyBackupDir(final, intoDir, `the off-machine copy of ${snapshotId}`, check);
    } catch (err) {
      await rm(intoDir, { recursive: true, force: true }).catch(() => {});
      throw err;
    }
  }

  async read(projectId: string, snapshotId: string, file: string) {
    const path = join(this.#copyDir(projectId, snapshotId), file);
    try {
      const { size } = await stat(path);
      return { body: createReadStream(path, { highWaterMark: 1024 * 1024 }), size };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  async remove(projectId: string, snapshotId: string): Promise<void> {
    const final = this.#copyDir(projectId, snapshotId);
    const parent = this.#projectDir(projectId);
    if (await exists(final)) {
      await rename(final, join(parent, `${REMOVING}${snapshotId}-${randomHex(8)}`));
      await fsyncPath(parent);
    }
    await this.#clearStale(projectId, snapshotId, [STAGING, REMOVING]);
    // The project's folder goes with its last copy; another copy arriving meanwhile keeps it.
    await rmdir(parent).catch(() => {});
  }

  async removeProject(projectId: string): Promise<number> {
    const ids = await this.list(projectId);
    for (const id of ids) await this.remove(projectId, id);
    return ids.length;
  }

  async list(projectId: string): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(this.#projectDir(projectId));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const ids = new Set<string>();
    for (const name of names) {
      const id = /^(?:\.staging-|\.removing-)?(snap_[0-9a-f]{16})(?:-[0-9a-f]+)?$/.exec(name)?.[1];
      if (id) ids.add(id);
    }
    return [...ids];
  }

  /** Removes the staging or removing names `prefixes` of one snapshot a crash (or a removal) left. */
  async #clearStale(projectId: string, snapshotId: string, prefixes: string[]): Promise<void> {
    const parent = this.#projectDir(projectId);
    let names: string[];
    try {
      names = await readdir(parent);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    for (const name of names) {
      if (!prefixes.some((p) => name.startsWith(`${p}${snapshotId}-`))) continue;
      await rm(join(parent, name), { recursive: true, force: true }).catch((err: Error) => this.#deps.log(`agent: removing ${join(parent, name)} failed: ${err.message}`));
    }
  }
}
