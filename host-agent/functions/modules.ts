/**
 * Function modules on this agent (docs/functions.md "Where the bytes are"). The bytes of every version
 * are kept in the deployment's blob store (`SVCD_BLOB_BACKEND`: this agent's `fs` store, or S3), under
 * a blob name derived like an object's (shared/blobs/names.ts) from the project, a reserved
 * pseudo-bucket no bucket can be named, the function and a fresh write id. Workers read a local copy:
 * `functions/<project>/modules/<sha256>.mjs` under `SVCD_ROOT`, content-addressed (a module deployed
 * twice is one file), written whole or not at all (temp file, fsync, rename), fetched again from the
 * blob store and checked against its SHA-256 whenever it is missing.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { blobName, newWriteId } from '../../shared/blobs/names.ts';
import { s3BlobStore } from '../../shared/blobs/s3.ts';
import type { BlobBackend } from '../../shared/blobs/store.ts';
import type { Settings } from '../../shared/config.ts';
import type { ModuleBlob } from '../../shared/db/functions.ts';
import { errors } from '../../shared/errors.ts';
import { randomHex } from '../../shared/ids.ts';
import type { FsBlobStore } from '../blobs/fs-store.ts';

/** The pseudo-bucket of module blobs: not a valid bucket name, so no object's blob name can equal a module's. */
export const MODULE_BLOB_BUCKET = '.functions';

/** A module received from a deploy: where its bytes are on this agent, and what they are. */
export interface ReceivedModule {
  path: string;
  sha256: string;
  size: number;
}

/** The blob store as modules use it. */
export interface ModuleBlobStore {
  readonly backend: BlobBackend;
  /** Stores the file at `path` (`size` bytes) as blob `name`. */
  put(project: string, name: string, path: string, size: number): Promise<void>;
  /** The blob's bytes, or null when the store has no such blob. */
  get(project: string, name: string): Promise<ReadableStream<Uint8Array> | null>;
  delete(project: string, name: string): Promise<void>;
}

/** The deployment's blob store for modules: this agent's `fs` store, or the `s3` one. */
export function moduleBlobStore(settings: Settings, fs: () => FsBlobStore): ModuleBlobStore {
  if (settings.SVCD_BLOB_BACKEND === 's3') {
    const s3 = s3BlobStore(settings);
    return {
      backend: 's3',
      async put(project, name, path, size) {
        const body = Readable.toWeb(createReadStream(path)) as ReadableStream<Uint8Array>;
        await s3.put(project, name, { body, length: size, maxBytes: size, contentType: 'text/javascript' });
      },
      async get(project, name) {
        return (await s3.get(project, name))?.body ?? null;
      },
      delete: (project, name) => s3.delete(project, name),
    };
  }
  return {
    backend: 'fs',
    async put(project, name, path, size) {
      const body = Readable.toWeb(createReadStream(path)) as ReadableStream<Uint8Array>;
      await fs().put(project, name, body, { maxBytes: size, length: size });
    },
    async get(project, name) {
      return (await fs().open(project, name))?.body ?? null;
    },
    async delete(project, name) {
      await fs().delete(project, name);
    },
  };
}

/** A fresh blob name for a new version of `name`. */
export function newModuleBlobName(project: string, name: string): Promise<string> {
  return blobName(project, MODULE_BLOB_BUCKET, name, newWriteId());
}

/** The local module files of this agent's functions. */
export class ModuleFiles {
  readonly #root: string;
  readonly #blobs: () => ModuleBlobStore;

  /** `root`: the functions area (`<SVCD_ROOT>/functions`). */
  constructor(root: string, blobs: () => ModuleBlobStore) {
    this.#root = root;
    this.#blobs = blobs;
  }

  /** Where the module with `sha256` of the project lives. */
  pathOf(projectId: string, sha256: string): string {
    return join(this.#root, projectId, 'modules', `${sha256}.mjs`);
  }

  /**
   * Streams a deployed module into a temporary file of its own (named `.mjs`, so it can be checked
   * where it is): at most `maxBytes` (413), exactly `length` when declared, not empty, valid UTF-8
   * (400 naming the problem). Nothing is left behind when it throws; `keep` or `drop` the result.
   */
  async receive(projectId: string, body: ReadableStream<Uint8Array>, maxBytes: number, length: number | null): Promise<ReceivedModule> {
    if (length !== null && length > maxBytes) throw tooLarge(maxBytes);
    const hash = createHash('sha256');
    const utf8 = new TextDecoder('utf-8', { fatal: true });
    let size = 0;
    const dir = join(this.#root, projectId, 'modules');
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const temp = join(dir, `.${randomHex(8)}.tmp.mjs`);
    let file: FileHandle | undefined = await open(temp, 'wx', 0o600);
    const reader = body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > maxBytes) throw tooLarge(maxBytes);
        if (length !== null && size > length) throw errors.invalid('body: longer than its declared length');
        try {
          utf8.decode(value, { stream: true });
        } catch {
          throw errors.invalid('body: the module is not valid UTF-8');
        }
        hash.update(value);
        await file.write(value);
      }
      try {
        utf8.decode();
      } catch {
        throw errors.invalid('body: the module is not valid UTF-8');
      }
      if (length !== null && size !== length) throw errors.invalid('body: shorter than its declared length');
      if (size === 0) throw errors.invalid('body: the module is empty');
      await file.sync();
      await file.close();
      file = undefined;
      return { path: temp, sha256: hash.digest('hex'), size };
    } catch (err) {
      // Not cancelled: the caller answers the refusal while the rest of the body is drained.
      reader.releaseLock();
      await file?.close().catch(() => {});
      await rm(temp, { force: true });
      throw err;
    }
  }

  /** Moves a received module to its content-addressed place; answers that path. */
  async keep(projectId: string, module: ReceivedModule): Promise<string> {
    const path = this.pathOf(projectId, module.sha256);
    await rename(module.path, path);
    return path;
  }

  /** Removes a received module that is not kept. */
  async drop(module: ReceivedModule): Promise<void> {
    await rm(module.path, { force: true });
  }

  /** Stores a received module in the blob store as `blob`. */
  async store(projectId: string, blob: string, module: ReceivedModule): Promise<ModuleBlob> {
    const store = this.#blobs();
    await store.put(projectId, blob, module.path, module.size);
    return { backend: store.backend, blob };
  }

  /** Removes the project's local copies whose digest is not in `keep`; answers how many. */
  async prune(projectId: string, keep: ReadonlySet<string>): Promise<number> {
    const dir = join(this.#root, projectId, 'modules');
    let removed = 0;
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      const m = /^([0-9a-f]{64})\.mjs$/.exec(name);
      if (!m || keep.has(m[1]!)) continue;
      await rm(join(dir, name), { force: true });
      removed++;
    }
    return removed;
  }

  /** Removes a version's blob; a failure is the caller's to log (the blob is then left unreferenced). */
  async discard(projectId: string, blob: ModuleBlob): Promise<void> {
    const store = this.#blobs();
    if (store.backend !== blob.backend) throw new Error(`blob ${blob.blob} is in the ${blob.backend} store, this deployment uses ${store.backend}`);
    await store.delete(projectId, blob.blob);
  }

  /**
   * The local file of a version's module, fetched from the blob store when missing (and checked
   * against its SHA-256 before it is used).
   */
  async ensure(projectId: string, version: ModuleBlob & { sha256: string }): Promise<string> {
    const path = this.pathOf(projectId, version.sha256);
    try {
      await stat(path);
      return path;
    } catch {
      // Missing here: fetched below.
    }
    const body = await this.#blobs().get(projectId, version.blob);
    if (!body) throw new Error(`the module blob ${version.blob} of project ${projectId} is missing from the ${version.backend} store`);
    const received = await this.receive(projectId, body, Number.MAX_SAFE_INTEGER, null);
    if (received.sha256 !== version.sha256) {
      await this.drop(received);
      throw new Error(`the module blob ${version.blob} of project ${projectId} does not match its SHA-256`);
    }
    return this.keep(projectId, received);
  }
}

function tooLarge(maxBytes: number) {
  return errors.tooLarge(`body: the module exceeds the limit of ${maxBytes} bytes (SVCD_FUNCTION_MAX_BYTES)`);
}
