/**
 * Where `svc storage cp` keeps the resumable uploads it started (docs/cli.md "Storage";
 * docs/storage.md "Resumable uploads"): `uploads.json` in the CLI's configuration directory, one
 * upload URL per file (its absolute path, size and modification time) and destination, so that the
 * same command run again after an interruption continues the upload instead of starting over. An
 * entry is removed once its upload completes; a changed file (size or time) is a new upload.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The file that keeps the URLs. */
const FILE = 'uploads.json';
/** Entries older than this are dropped when the file is written (the service expires uploads after a day by default). */
const KEEP_MS = 7 * 24 * 3600 * 1000;

type Entries = Record<string, { url: string; at: number }>;

/** The resumable uploads of one configuration directory. */
export interface ResumeStore {
  /** The URL of an unfinished upload of this file to this destination, if one was started. */
  find(): string | undefined;
  /** Remembers the upload's URL. */
  save(url: string): void;
  /** Forgets it (the upload completed). */
  forget(): void;
}

/** The store entry of `file` (as `stat` describes it now) uploaded to `destination` on `baseUrl`. */
export function resumeStore(dir: string, file: string, stat: { size: number; mtimeMs: number }, destination: string, baseUrl: string): ResumeStore {
  const id = createHash('sha256').update(JSON.stringify([resolve(file), stat.size, stat.mtimeMs, destination, baseUrl])).digest('hex');
  const path = join(dir, FILE);
  const read = (): Entries => {
    try {
      return JSON.parse(readFileSync(path, 'utf8')) as Entries;
    } catch {
      return {};
    }
  };
  const write = (entries: Entries) => {
    const now = Date.now();
    for (const [k, v] of Object.entries(entries)) if (now - v.at > KEEP_MS) delete entries[k];
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const tmp = `${path}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(entries, null, 2), { mode: 0o600 });
    renameSync(tmp, path);
  };
  return {
    find: () => read()[id]?.url,
    save(url) {
      write({ ...read(), [id]: { url, at: Date.now() } });
    },
    forget() {
      const entries = read();
      if (!(id in entries)) return;
      delete entries[id];
      write(entries);
    },
  };
}
