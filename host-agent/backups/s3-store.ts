/**
 * The `s3` off-machine store (docs/lifecycle.md "Off-machine copies"): the deployment's bucket, keys
 * `backups/<project>/<snapshot_id>/<file>` and the marker `backups/<project>/<snapshot_id>/complete.json`.
 *
 * A put streams each file from the backup directory (flat memory), hashing the bytes it sends: their
 * SHA-256 must be the manifest's, their MD5 the ETag the store answered (a single PutObject's ETag is
 * the MD5 of what it stored; a store that answers another kind is read back and hashed), and the
 * stored size the manifest's. Only then is the marker written: a crash at any point leaves files
 * without a marker (no copy: never fetched, removed by the next put or remove) or a complete copy.
 * Removal deletes the marker first, then the files.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { createS3Client } from '../../shared/blobs/s3.ts';
import { ServiceError, errors } from '../../shared/errors.ts';
import { ID_PATTERNS } from '../../shared/ids.ts';
import { nowIso } from '../../shared/time.ts';
import { checkDir, checkFile, MANIFEST, parseManifest, readManifest } from './manifest.ts';
import type { BackupSettings, BackupStore, BackupStoreDeps } from './store.ts';

/** The marker of a complete copy. */
export const COMPLETE_MARKER = 'complete.json';

/** The `s3` store of the deployment's bucket. */
export function createS3BackupStore(settings: BackupSettings, deps: BackupStoreDeps): BackupStore {
  return new S3BackupStore(createS3Client(settings), settings.SVCD_S3_BUCKET, deps);
}

/** The key prefix of a project's copies (also what a project's deletion purges). */
export function backupPrefix(projectId: string): string {
  return `backups/${projectId}/`;
}

function isMissing(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NotFound' || e?.name === 'NoSuchKey' || e?.$metadata?.httpStatusCode === 404;
}

/** S3 failures as 502 naming the error, never its message (docs/api.md "Errors"). */
function translate(err: unknown, what: string): unknown {
  if (err instanceof ServiceError) return err;
  const name = (err as { name?: string })?.name ?? 'Error';
  return errors.upstream(`the off-machine store failed ${what} (${name})`);
}

class S3BackupStore implements BackupStore {
  readonly kind = 's3' as const;
  readonly #client: S3Client;
  readonly #bucket: string;
  readonly #deps: BackupStoreDeps;

  constructor(client: S3Client, bucket: string, deps: BackupStoreDeps) {
    this.#client = client;
    this.#bucket = bucket;
    this.#deps = deps;
  }

  #key(projectId: string, snapshotId: string, file: string): string {
    if (!ID_PATTERNS.prj.test(projectId) || !ID_PATTERNS.snap.test(snapshotId)) throw errors.invalid('not a project or snapshot id');
    return `${backupPrefix(projectId)}${snapshotId}/${file}`;
  }

  async put(projectId: string, snapshotId: string, backupDir: string): Promise<void> {
    if (await this.isComplete(projectId, snapshotId)) return;
    const where = `the off-machine copy of ${snapshotId}`;
    const manifest = await readManifest(backupDir);
    try {
      for (const file of manifest.files) {
        const sent = await this.#upload(this.#key(projectId, snapshotId, file.path), join(backupDir, file.path));
        checkFile(file, sent, `${where} (as sent)`);
        await this.#checkStored(projectId, snapshotId, file.path, sent);
      }
      const manifestKey = this.#key(projectId, snapshotId, MANIFEST);
      await this.#client.send(new PutObjectCommand({ Bucket: this.#bucket, Key: manifestKey, Body: manifest.bytes, ContentLength: manifest.bytes.length }));
      const stored = await this.#getBytes(manifestKey);
      if (!stored?.equals(manifest.bytes)) throw errors.conflict(`${where}: the stored manifest differs from the backup's`);
      // Last: the marker is the completion.
      const marker = Buffer.from(JSON.stringify({ project: projectId, snapshot_id: snapshotId, completed_at: nowIso(this.#deps.now()), files: manifest.files }));
      await this.#client.send(new PutObjectCommand({ Bucket: this.#bucket, Key: this.#key(projectId, snapshotId, COMPLETE_MARKER), Body: marker, ContentLength: marker.length, ContentType: 'application/json' }));
    } catch (err) {
      throw translate(err, `copying ${snapshotId}`);
    }
  }

  /** Streams `path` to `key` in one PutObject; answers the size, SHA-256 and MD5 of the bytes sent. */
  async #upload(key: string, path: string): Promise<{ size: number; sha256: string; md5: string; etag: string | undefined }> {
    const { size } = await stat(path);
    const sha = createHash('sha256');
    const md5 = createHash('md5');
    let sent = 0;
    const tap = new PassThrough({
      transform(chunk: Buffer, _enc, done) {
        sha.update(chunk);
        md5.update(chunk);
        sent += chunk.length;
        done(null, chunk);
      },
    });
    const source = createReadStream(path, { highWaterMark: 1024 * 1024 });
    source.on('error', (err) => tap.destroy(err));
    source.pipe(tap);
    const body = size === 0 ? new Uint8Array(0) : (Readable.toWeb(tap) as ReadableStream<Uint8Array>);
    const out = await this.#client.send(new PutObjectCommand({ Bucket: this.#bucket, Key: key, Body: body, ContentLength: size }));
    if (size === 0) source.destroy();
    return { size: sent, sha256: sha.digest('hex'), md5: md5.digest('hex'), etag: out.ETag?.replace(/"/g, '') };
  }

  /** The stored object is the bytes sent: its size, and its ETag as their MD5 (or read back and hashed). */
  async #checkStored(projectId: string, snapshotId: string, file: string, sent: { size: number; sha256: string; md5: string; etag: string | undefined }): Promise<void> {
    const key = this.#key(projectId, snapshotId, file);
    const head = await this.#client.send(new HeadObjectCommand({ Bucket: this.#bucket, Key: key }));
    const where = `the off-machine copy of ${snapshotId}`;
    if (head.ContentLength !== sent.size) throw errors.conflict(`${where}: ${file} is stored with ${head.ContentLength} bytes, ${sent.size} were sent`);
    if (sent.etag && /^[0-9a-f]{32}$/.test(sent.etag)) {
      if (sent.etag !== sent.md5) throw errors.conflict(`${where}: the store's MD5 of ${file} differs from the bytes sent`);
      return;
    }
    const read = await this.read(projectId, snapshotId, file, true);
    const sha = createHash('sha256');
    for await (const chunk of read!.body) sha.update(chunk as Buffer);
    if (sha.digest('hex') !== sent.sha256) throw errors.conflict(`${where}: the stored SHA-256 of ${file} differs from the bytes sent`);
  }

  async #getBytes(key: string): Promise<Buffer | null> {
    try {
      const out = await this.#client.send(new GetObjectCommand({ Bucket: this.#bucket, Key: key }));
      return Buffer.from(await out.Body!.transformToByteArray());
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  async isComplete(projectId: string, snapshotId: string): Promise<boolean> {
    try {
      await this.#client.send(new HeadObjectCommand({ Bucket: this.#bucket, Key: this.#key(projectId, snapshotId, COMPLETE_MARKER) }));
      return true;
    } catch (err) {
      if (isMissing(err)) return false;
      throw translate(err, 'reading a marker');
    }
  }

  async fetch(projectId: string, snapshotId: string, intoDir: string, check = true): Promise<void> {
    if (!(await this.isComplete(projectId, snapshotId))) throw errors.notFound(`no off-machine copy of snapshot ${snapshotId}`);
    await mkdir(intoDir, { recursive: false, mode: 0o700 });
    try {
      const bytes = await this.#getBytes(this.#key(projectId, snapshotId, MANIFEST));
      if (!bytes) throw errors.conflict(`the off-machine copy of ${snapshotId} has no manifest`);
      const manifest = parseManifest(bytes);
      await writeFile(join(intoDir, MANIFEST), bytes);
      for (const file of manifest.files) {
        const read = await this.read(projectId, snapshotId, file.path, true);
        if (!read) throw errors.conflict(`the off-machine copy of ${snapshotId} lacks ${file.path}`);
        await pipeline(read.body, createWriteStream(join(intoDir, file.path)));
      }
      if (check) await checkDir(intoDir, `the off-machine copy of ${snapshotId}`);
    } catch (err) {
      await rm(intoDir, { recursive: true, force: true }).catch(() => {});
      throw translate(err, `fetching ${snapshotId}`);
    }
  }

  async read(projectId: string, snapshotId: string, file: string, partial = false) {
    if (!partial && !(await this.isComplete(projectId, snapshotId))) return null;
    try {
      const out = await this.#client.send(new GetObjectCommand({ Bucket: this.#bucket, Key: this.#key(projectId, snapshotId, file) }));
      const body = Readable.fromWeb(out.Body!.transformToWebStream() as import('node:stream/web').ReadableStream);
      return { body, size: out.ContentLength ?? 0 };
    } catch (err) {
      if (isMissing(err)) return null;
      throw translate(err, `reading ${snapshotId}`);
    }
  }

  async remove(projectId: string, snapshotId: string): Promise<void> {
    try {
      await this.#client.send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: this.#key(projectId, snapshotId, COMPLETE_MARKER) }));
      const prefix = this.#key(projectId, snapshotId, '');
      const listed = await this.#client.send(new ListObjectsV2Command({ Bucket: this.#bucket, Prefix: prefix }));
      const objects = (listed.Contents ?? []).map((o) => ({ Key: o.Key! }));
      for (const o of objects) await this.#client.send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: o.Key }));
    } catch (err) {
      throw translate(err, `removing ${snapshotId}`);
    }
  }

  async removeProject(projectId: string): Promise<number> {
    const ids = await this.list(projectId);
    for (const id of ids) await this.remove(projectId, id);
    return ids.length;
  }

  async list(projectId: string): Promise<string[]> {
    const ids = new Set<string>();
    let token: string | undefined;
    try {
      do {
        const out = await this.#client.send(new ListObjectsV2Command({ Bucket: this.#bucket, Prefix: backupPrefix(projectId), ContinuationToken: token }));
        for (const o of out.Contents ?? []) {
          const id = o.Key!.slice(backupPrefix(projectId).length).split('/')[0]!;
          if (ID_PATTERNS.snap.test(id)) ids.add(id);
        }
        token = out.IsTruncated ? out.NextContinuationToken : undefined;
      } while (token);
    } catch (err) {
      throw translate(err, 'listing copies');
    }
    return [...ids];
  }
}
