/**
 * The engine's backup directory as the off-machine copies see it (docs/engine.md "Directory layout":
 * `data.sqlite`, `meta.json` and `manifest.json`, whose `files` list every other file's size and
 * SHA-256). A copy holds exactly the manifest's files and the manifest, and is checked against it.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { errors } from '../../shared/errors.ts';

/** The manifest's file name in a backup directory. */
export const MANIFEST = 'manifest.json';

/** The only names a backup directory may hold (docs/engine.md "Directory layout"). */
export const BACKUP_FILES = ['data.sqlite', 'meta.json', MANIFEST] as const;

const fileSchema = z.object({
  path: z.enum(['data.sqlite', 'meta.json']),
  size: z.int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});

/** What the copies rely on of a manifest; the rest is the engine's. */
export const manifestSchema = z.looseObject({
  format: z.literal('svc-engine-backup/1'),
  engine_version: z.string(),
  catalog_version: z.int(),
  logical_time_micros: z.int(),
  files: z.array(fileSchema).min(1),
});

/** One file a manifest lists. */
export type ManifestFile = z.output<typeof fileSchema>;

/** A manifest as read: its files, the whole document, and its own bytes (copied as they are). */
export interface Manifest {
  files: ManifestFile[];
  document: z.output<typeof manifestSchema>;
  bytes: Buffer;
}

/** Parses a manifest's bytes; 409 `conflict` for one that is not a backup's (the engine's exit 5, docs/engine.md). */
export function parseManifest(bytes: Buffer): Manifest {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw errors.conflict('the backup manifest is not JSON');
  }
  const parsed = manifestSchema.safeParse(value);
  if (!parsed.success) throw errors.conflict(`the backup manifest is not one of svc-engine-backup/1 (${parsed.error.issues[0]?.path.join('.') || 'document'})`);
  const names = parsed.data.files.map((f) => f.path);
  if (new Set(names).size !== names.length) throw errors.conflict('the backup manifest lists a file twice');
  return { files: parsed.data.files, document: parsed.data, bytes };
}

/** Reads the manifest of a backup directory. */
export async function readManifest(dir: string): Promise<Manifest> {
  let bytes: Buffer;
  try {
    bytes = await readFile(join(dir, MANIFEST));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw errors.conflict(`the backup directory has no ${MANIFEST}`);
    throw err;
  }
  return parseManifest(bytes);
}

/** Size and SHA-256 of a file, read as a stream (flat memory). */
export async function hashFile(path: string): Promise<{ size: number; sha256: string }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 1024 * 1024 })) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { size, sha256: hash.digest('hex') };
}

/** Throws 409 `conflict` unless `seen` is what the manifest says of `file`. */
export function checkFile(file: ManifestFile, seen: { size: number; sha256: string }, where: string): void {
  if (seen.size !== file.size) throw errors.conflict(`${where}: ${file.path} holds ${seen.size} bytes, the manifest says ${file.size}`);
  if (seen.sha256 !== file.sha256) throw errors.conflict(`${where}: the SHA-256 of ${file.path} differs from the manifest's`);
}

/** Checks every file of a backup directory against its manifest (sizes and SHA-256); answers the manifest. */
export async function checkDir(dir: string, where: string): Promise<Manifest> {
  const manifest = await readManifest(dir);
  for (const file of manifest.files) {
    const seen = await hashFile(join(dir, file.path)).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') throw errors.conflict(`${where}: ${file.path} is missing`);
      throw err;
    });
    checkFile(file, seen, where);
  }
  return manifest;
}
