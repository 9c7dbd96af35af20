/**
 * An imported archive unpacked (docs/lifecycle.md "Export and import"): the body is read as a tar
 * (node-tar's `Parser`, strict) straight into a staging directory, one entry at a time, flat memory.
 * Only what an exported archive holds is taken: regular files named `manifest.json`, `meta.json`,
 * `data.sqlite`, each once, either at the top or all under one top directory (whose own entry may
 * come first). Anything else — an absolute path, `..`, a link, a device, another name, a file twice,
 * a body that is not a tar or ends early — is 400 `invalid_request` and leaves nothing: the staging
 * directory is the caller's to remove. More than `maxBytes` is 413.
 */
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Parser, type ReadEntry } from 'tar';
import { ServiceError, errors } from '../../shared/errors.ts';
import { BACKUP_FILES } from './manifest.ts';

const notOne = (why: string) => errors.invalid(`body: not an archive of a snapshot (${why}); send the file GET …/snapshots/{snapshot_id}/archive answers`);

/** Where an entry goes: a backup file's name, the top directory itself (null), or a refusal. */
function placeOf(entry: ReadEntry, top: { name: string | null | undefined }): string | null {
  const path = entry.path;
  if (path.startsWith('/') || path.includes('\\') || path.includes('\0')) throw notOne(`entry ${JSON.stringify(path)} has an absolute or odd path`);
  const parts = path.split('/').filter((p, i, all) => p !== '' || i < all.length - 1);
  if (parts.some((p) => p === '..' || p === '.' || p === '')) throw notOne(`entry ${JSON.stringify(path)} leaves its directory`);
  const dirPart = parts.length === 2 ? parts[0]! : null;
  if (parts.length > 2) throw notOne(`entry ${JSON.stringify(path)} is nested too deep`);
  if (entry.type === 'Directory') {
    if (parts.length !== 1 || (top.name !== undefined && top.name !== parts[0])) throw notOne(`unexpected directory ${JSON.stringify(path)}`);
    top.name = parts[0]!;
    return null;
  }
  if (entry.type !== 'File' && entry.type !== 'OldFile' && entry.type !== 'ContiguousFile') throw notOne(`entry ${JSON.stringify(path)} is a ${entry.type}, not a regular file`);
  if (top.name === undefined) top.name = dirPart;
  if (top.name !== dirPart) throw notOne('its files are not all in one directory');
  const name = parts[parts.length - 1]!;
  if (!(BACKUP_FILES as readonly string[]).includes(name)) throw notOne(`unknown file ${JSON.stringify(name)}`);
  return name;
}

/** Counts the body against `maxBytes` (413 past it) and answers the count so far. */
function counter(maxBytes: number): { stage: Transform; bytes: () => number } {
  let bytes = 0;
  const stage = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length;
      if (bytes > maxBytes) return done(errors.tooLarge(`body: the archive exceeds the limit of ${maxBytes} bytes (SVCD_IMPORT_MAX_BYTES)`));
      done(null, chunk);
    },
  });
  return { stage, bytes: () => bytes };
}

/** Unpacks the archive `body` into `dir` (made here); answers the bytes read. */
export async function unpackArchive(body: Readable, dir: string, maxBytes: number): Promise<number> {
  await mkdir(dir, { recursive: false, mode: 0o700 });
  const top: { name: string | null | undefined } = { name: undefined };
  const seen = new Set<string>();
  const writes: Promise<void>[] = [];
  let failure: unknown = null;
  const fail = (err: unknown) => {
    failure ??= err;
  };
  const parser = new Parser({
    strict: true,
    onReadEntry: (entry: ReadEntry) => {
      try {
        if (failure) return entry.resume();
        const name = placeOf(entry, top);
        if (name === null) return entry.resume();
        if (seen.has(name)) throw notOne(`${name} appears twice`);
        seen.add(name);
        writes.push(pipeline(entry as unknown as Readable, createWriteStream(join(dir, name), { flags: 'wx', mode: 0o600 })).catch(fail));
      } catch (err) {
        fail(err);
        entry.resume();
      }
    },
  });
  parser.on('warn', (code: string, message: string) => fail(notOne(`${code}: ${message}`)));
  const count = counter(maxBytes);
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      if (parser.write(chunk)) done();
      else parser.once('drain', () => done());
    },
    final(done) {
      parser.end(() => done());
    },
  });
  try {
    await pipeline(body, count.stage, sink);
  } catch (err) {
    if (err instanceof ServiceError) throw err;
    throw failure ?? notOne((err as Error).message);
  }
  await Promise.all(writes);
  if (failure) throw failure instanceof ServiceError ? failure : notOne((failure as Error).message);
  for (const name of BACKUP_FILES) if (!seen.has(name)) throw notOne(`it has no ${name}`);
  return count.bytes();
}

/** A web body as a Node stream (the internal routes' requests are web Requests). */
export function nodeBody(body: ReadableStream<Uint8Array> | null): Readable {
  return body ? Readable.fromWeb(body as import('node:stream/web').ReadableStream) : Readable.from([]);
}
