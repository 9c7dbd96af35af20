/** Small crash-safe file helpers of the supervisor: durable JSON records and durable renames. */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import { dirname } from 'node:path';

/** fsync a file or directory, so a new entry or a rename survives a crash of the machine. */
export function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes `value` as JSON to `path` atomically (temp file, fsync, rename, fsync of the directory). */
export function writeJsonDurable(path: string, value: unknown): void {
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeFileSync(fd, `${JSON.stringify(value)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  fsyncPath(dirname(path));
}

/** writeJsonDurable without blocking the event loop (used while an engine boots). */
export async function writeJsonDurableAsync(path: string, value: unknown): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}-${Math.random().toString(16).slice(2)}`;
  const file = await open(tmp, 'w', 0o600);
  try {
    await file.writeFile(`${JSON.stringify(value)}\n`);
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(tmp, path);
  const dir = await open(dirname(path), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

/** Reads a JSON record, or null when it is absent or torn (a torn record is treated as absent). */
export function readJsonRecord(path: string): Record<string, unknown> | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  try {
    const value = JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

/** Removes a record file of the supervisor's own (pid record, journal) and makes that durable. */
export function removeRecord(path: string): void {
  if (!existsSync(path)) return;
  rmSync(path, { force: true });
  fsyncPath(dirname(path));
}

/** Renames `from` to `to` and makes both directory entries durable. */
export function renameDurable(from: string, to: string): void {
  renameSync(from, to);
  fsyncPath(dirname(to));
  if (dirname(from) !== dirname(to)) fsyncPath(dirname(from));
}
