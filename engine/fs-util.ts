/** Small synchronous file-system helpers shared by the CLI commands. */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readSync, readdirSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/** Lowercase hex of `bytes` random bytes from the CSPRNG. */
export function randomHex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

/** SHA-256 hex digest and size of a file, read in 1 MiB chunks so a large database never sits in memory. */
export function digestFile(path: string): { sha256: string; size: number } {
  const hash = createHash('sha256');
  const buffer = Buffer.allocUnsafe(1 << 20);
  const fd = openSync(path, 'r');
  let size = 0;
  try {
    for (;;) {
      const n = readSync(fd, buffer, 0, buffer.length, null);
      if (n === 0) break;
      hash.update(buffer.subarray(0, n));
      size += n;
    }
  } finally {
    closeSync(fd);
  }
  return { sha256: hash.digest('hex'), size };
}

/** fsync a file or a directory, so a rename or a new entry survives a power loss. */
export function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** What is at `path`: nothing, an empty directory, or something else (a non-empty directory or a file). */
export function pathState(path: string): 'absent' | 'empty-dir' | 'occupied' {
  let stats;
  try {
    stats = statSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'absent';
    throw err;
  }
  if (!stats.isDirectory()) return 'occupied';
  return readdirSync(path).length === 0 ? 'empty-dir' : 'occupied';
}

/**
 * A fresh sibling of `target` to build in before an atomic rename into place
 * (`<target>.staging-<random>`): same file system, so the rename is atomic.
 */
export function stagingPathFor(target: string): string {
  return join(dirname(target), `${basename(target)}.staging-${randomHex(8)}`);
}

/** Removes a staging directory this process created; never throws (used on failure paths). */
export function removeQuietly(path: string): void {
  try {
    rmSync(path, { recursive: true, force: true });
  } catch {
    // Best effort: the failure being reported matters more than a leftover staging directory.
  }
}
