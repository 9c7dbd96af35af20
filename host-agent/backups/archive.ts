/**
 * A snapshot as one file (docs/lifecycle.md "Export and import"): a ustar archive of its backup
 * directory, entries `<snapshot_id>/manifest.json`, `<snapshot_id>/meta.json`,
 * `<snapshot_id>/data.sqlite` (the manifest first), each a regular file of mode 0600. Unpacked, it
 * is a directory the engine's `verify` accepts. Its length is known before a byte is sent (512 per
 * header, the data padded to 512, two zero blocks at the end), and it is streamed file by file: flat
 * memory whatever the size. Headers are node-tar's (`Header`).
 *
 * The source is this machine's backup directory, or the snapshot's off-machine copy when this machine
 * has none (a directory lost with its machine, a project moved here).
 */
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { Header } from 'tar';
import { errors } from '../../shared/errors.ts';
import { MANIFEST, readManifest } from './manifest.ts';
import type { BackupStore } from './store.ts';

const BLOCK = 512;

/** One file of an archive: its name in the backup directory, its size, its bytes. */
export interface ArchiveFile {
  name: string;
  size: number;
  body: () => Readable;
  /** Releases what the file holds open when the archive is not streamed to its end. */
  close: () => Promise<void>;
}

/** The archive's files, in their order: the manifest first. */
function ordered(names: string[]): string[] {
  return [MANIFEST, ...names.filter((n) => n !== MANIFEST).sort((a, b) => (a === 'meta.json' ? -1 : b === 'meta.json' ? 1 : a.localeCompare(b)))];
}

/**
 * The files of a backup directory on this machine, each opened now: a deletion of the snapshot
 * while the archive streams removes names, not the bytes already open.
 */
export async function localFiles(dir: string): Promise<ArchiveFile[]> {
  const manifest = await readManifest(dir);
  const handles: FileHandle[] = [];
  try {
    const files: ArchiveFile[] = [];
    for (const name of ordered(manifest.files.map((f) => f.path))) {
      const handle = await open(join(dir, name), 'r');
      handles.push(handle);
      const { size } = await handle.stat();
      files.push({
        name,
        size,
        body: () => handle.createReadStream({ highWaterMark: 1024 * 1024, start: 0, end: size === 0 ? undefined : size - 1, autoClose: true }),
        close: () => handle.close().catch(() => {}),
      });
    }
    return files;
  } catch (err) {
    await Promise.all(handles.map((h) => h.close().catch(() => {})));
    throw err;
  }
}

/** The files of the snapshot's complete off-machine copy; null when there is none. */
export async function storeFiles(store: BackupStore, projectId: string, snapshotId: string): Promise<ArchiveFile[] | null> {
  if (!(await store.isComplete(projectId, snapshotId))) return null;
  const manifest = await store.read(projectId, snapshotId, MANIFEST);
  if (!manifest) return null;
  const chunks: Buffer[] = [];
  for await (const chunk of manifest.body) chunks.push(chunk as Buffer);
  const bytes = Buffer.concat(chunks);
  const { parseManifest } = await import('./manifest.ts');
  const listed = parseManifest(bytes).files;
  const files: ArchiveFile[] = [{ name: MANIFEST, size: bytes.length, body: () => Readable.from([bytes]), close: async () => {} }];
  for (const name of ordered(listed.map((f) => f.path)).slice(1)) {
    const size = listed.find((f) => f.path === name)!.size;
    let opened: Readable | null = null;
    files.push({
      name,
      size,
      body: () =>
        Readable.from(
          (async function* () {
            const read = await store.read(projectId, snapshotId, name);
            if (!read) throw errors.notFound(`the off-machine copy of ${snapshotId} lacks ${name}`);
            opened = read.body;
            yield* read.body;
          })(),
        ),
      close: async () => {
        (opened as Readable | null)?.destroy();
      },
    });
  }
  return files;
}

/** The archive's length in bytes. */
export function archiveLength(files: ArchiveFile[]): number {
  return files.reduce((sum, f) => sum + BLOCK + Math.ceil(f.size / BLOCK) * BLOCK, 0) + 2 * BLOCK;
}

/** A ustar header of one entry. */
function header(path: string, size: number, mtime: Date): Buffer {
  const block = Buffer.alloc(BLOCK);
  new Header({ path, mode: 0o600, size, mtime, type: 'File', uid: 0, gid: 0, uname: '', gname: '' }).encode(block, 0);
  return block;
}

/**
 * The archive as a stream: `<top>/<file>` per file. A file that yields more or fewer bytes than its
 * size fails the stream (an archive that says one thing and holds another is never sent whole).
 */
export function archiveStream(top: string, files: ArchiveFile[], mtime: Date): Readable {
  async function* generate(): AsyncGenerator<Buffer> {
    try {
      for (const file of files) {
        yield header(`${top}/${file.name}`, file.size, mtime);
        let sent = 0;
        for await (const chunk of file.body()) {
          sent += (chunk as Buffer).length;
          if (sent > file.size) throw new Error(`${file.name} grew while it was archived`);
          yield chunk as Buffer;
        }
        if (sent !== file.size) throw new Error(`${file.name} shrank while it was archived`);
        const pad = (BLOCK - (file.size % BLOCK)) % BLOCK;
        if (pad > 0) yield Buffer.alloc(pad);
      }
      yield Buffer.alloc(2 * BLOCK);
    } finally {
      await Promise.all(files.map((f) => f.close()));
    }
  }
  return Readable.from(generate(), { objectMode: false });
}
