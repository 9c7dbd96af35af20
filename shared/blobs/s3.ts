/**
 * The `s3` blob backend: any S3-compatible endpoint through @aws-sdk/client-s3 (docs/storage.md
 * "The `s3` backend").
 *
 * - The client is built with `requestChecksumCalculation`/`responseChecksumValidation` set to
 *   `WHEN_REQUIRED`: with the defaults, S3-compatible stores such as s3rver store the aws-chunked
 *   trailer inside the object.
 * - Requests go through the SDK's fetch handler everywhere (workerd, and Node for tests and the Node
 *   adapter), because the Node handler cannot send a web ReadableStream body: one streaming path.
 * - A body with a declared length is streamed in one PutObject; a body without one goes through
 *   @aws-sdk/lib-storage's `Upload` (S3 needs a length per request): one PutObject when it fits one
 *   part, else a multipart upload of bounded parts, one in flight, aborted on any failure, so memory
 *   stays bounded and nothing is left behind. The ETag is the store's answer to the write; the size
 *   is the byte count the store acknowledged (it checks every request's length).
 * - Blob keys are `blobs/<project>/<name>`: `name` is a hash (shared/blobs/names.ts), never the key.
 * - SDK failures are translated here: a missing object is `null`, anything else is 502
 *   `upstream_unavailable` naming the S3 error, never its message (docs/api.md "Errors").
 * - A store is built once per isolate or process by its owner (the handlers' `Deps`, the agent's
 *   module store), never found through module state.
 */
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { FetchHttpHandler } from '@smithy/fetch-http-handler';
import type { Settings } from '../config.ts';
import { ServiceError, errors } from '../errors.ts';
import { countedBody, tooLargeError } from './limit.ts';
import type { BlobBytes, BlobPut, BlobStore, BlobWritten, ByteRange } from './store.ts';

/** The settings the `s3` backend reads. */
export type S3Settings = Pick<
  Settings,
  'SVCD_S3_ENDPOINT' | 'SVCD_S3_REGION' | 'SVCD_S3_BUCKET' | 'SVCD_S3_FORCE_PATH_STYLE' | 'SVCD_S3_ACCESS_KEY_ID' | 'SVCD_S3_SECRET_ACCESS_KEY'
>;

/** Part size of multipart uploads (bodies without a length): S3 needs at least 5 MiB but the last. */
export const S3_PART_BYTES = 8 * 1024 * 1024;

/** The S3 client of a deployment (the checksum settings and fetch handler of docs/storage.md "The `s3` backend"). */
export function createS3Client(settings: S3Settings): S3Client {
  const credentials =
    settings.SVCD_S3_ACCESS_KEY_ID && settings.SVCD_S3_SECRET_ACCESS_KEY
      ? { accessKeyId: settings.SVCD_S3_ACCESS_KEY_ID, secretAccessKey: settings.SVCD_S3_SECRET_ACCESS_KEY }
      : undefined;
  return new S3Client({
    region: settings.SVCD_S3_REGION,
    ...(settings.SVCD_S3_ENDPOINT ? { endpoint: settings.SVCD_S3_ENDPOINT } : {}),
    forcePathStyle: settings.SVCD_S3_FORCE_PATH_STYLE,
    ...(credentials ? { credentials } : {}),
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: new FetchHttpHandler({ requestTimeout: 0 }),
    maxAttempts: 3,
  });
}

/** The S3 object key of a blob. */
export function s3KeyOf(project: string, name: string): string {
  return `blobs/${project}/${name}`;
}

/** The `s3` store of a deployment, over a client of its own: its caller keeps it for the isolate's life. */
export function s3BlobStore(settings: S3Settings): BlobStore {
  return createS3BlobStore(createS3Client(settings), settings.SVCD_S3_BUCKET);
}

/** An `s3` store over `client` and one S3 bucket. */
export function createS3BlobStore(client: S3Client, bucket: string): BlobStore {
  return new S3BlobStore(client, bucket);
}

class S3BlobStore implements BlobStore {
  readonly backend = 's3' as const;
  readonly #client: S3Client;
  readonly #bucket: string;

  constructor(client: S3Client, bucket: string) {
    this.#client = client;
    this.#bucket = bucket;
  }

  async put(project: string, name: string, input: BlobPut): Promise<BlobWritten> {
    const key = s3KeyOf(project, name);
    if (input.length !== null && input.length > input.maxBytes) throw tooLargeError(input.maxBytes);
    let written = false;
    try {
      const { etag, size } = input.length !== null ? await this.#putSized(key, input, input.length) : await this.#putUnsized(key, input);
      written = true;
      // The store acknowledged exactly these bytes (it checks every request's length); a store
      // that answers no ETag is asked for both.
      return etag ? { size, etag: unquote(etag) } : await this.#head(key);
    } catch (err) {
      if (written) await this.#client.send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: key })).catch(() => {});
      throw translate(err);
    }
  }

  /**
   * A declared length bounds the body already (the HTTP layer delimits it, and the store checks it),
   * so the request body goes to the store untouched: in workerd a stream stage written in
   * JavaScript would cost most of the throughput and lose the length.
   */
  async #putSized(key: string, input: BlobPut, length: number): Promise<{ etag?: string | undefined; size: number }> {
    const out = await this.#client.send(
      new PutObjectCommand({
        Bucket: this.#bucket,
        Key: key,
        Body: length === 0 ? new Uint8Array(0) : input.body,
        ContentLength: length,
        ContentType: input.contentType,
      }),
      { abortSignal: input.signal },
    );
    if (length === 0) await input.body.cancel().catch(() => {});
    return { etag: out.ETag, size: length };
  }

  /**
   * A body of unknown length, counted against the limit as `Upload` reads it. A failure of the body
   * (over the limit, the request aborted) fails the upload, which aborts its multipart upload before
   * `done()` settles: nothing is left in the bucket. The body's failure is the one reported, even
   * when the abort fails too (s3rver answers AbortMultipartUpload 405).
   */
  async #putUnsized(key: string, input: BlobPut): Promise<{ etag?: string | undefined; size: number }> {
    const counted = countedBody(input.body, input.maxBytes, input.signal);
    const upload = new Upload({
      client: this.#client,
      params: { Bucket: this.#bucket, Key: key, Body: counted.body, ContentType: input.contentType },
      partSize: S3_PART_BYTES,
      queueSize: 1,
      leavePartsOnError: false,
    });
    try {
      const out = await upload.done();
      return { etag: out.ETag, size: counted.size() };
    } catch (err) {
      throw counted.failure() ?? err;
    }
  }

  async #head(key: string): Promise<BlobWritten> {
    const out = await this.#client.send(new HeadObjectCommand({ Bucket: this.#bucket, Key: key }));
    if (typeof out.ContentLength !== 'number' || !out.ETag) throw errors.upstream('the s3 blob store answered without a size or ETag');
    return { size: out.ContentLength, etag: unquote(out.ETag) };
  }

  async get(project: string, name: string, range?: ByteRange, signal?: AbortSignal): Promise<BlobBytes | null> {
    try {
      const out = await this.#client.send(
        new GetObjectCommand({
          Bucket: this.#bucket,
          Key: s3KeyOf(project, name),
          ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}),
        }),
        { abortSignal: signal },
      );
      if (!out.Body || typeof out.ContentLength !== 'number') throw errors.upstream('the s3 blob store answered without a body');
      const body = out.Body.transformToWebStream() as ReadableStream<Uint8Array>;
      if (!range) return { body, length: out.ContentLength };
      return await withinRange(body, range, out.ContentRange, out.ContentLength);
    } catch (err) {
      if (isMissing(err)) return null;
      throw translate(err);
    }
  }

  async delete(project: string, name: string): Promise<void> {
    try {
      await this.#client.send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: s3KeyOf(project, name) }));
    } catch (err) {
      if (isMissing(err)) return;
      throw translate(err);
    }
  }
}

/**
 * The asked `range` of an answer to a ranged GET. A store may answer more than the range asked (RFC
 * 9110 lets it ignore Range; s3rver answers `bytes=0-0` with the whole object): cut the answer down
 * to the range.
 */
async function withinRange(body: ReadableStream<Uint8Array>, range: ByteRange, contentRange: string | undefined, contentLength: number): Promise<BlobBytes> {
  const got = /^bytes (\d+)-(\d+)\/\d+$/.exec(contentRange ?? '');
  const gotStart = got ? Number(got[1]) : 0;
  const gotEnd = got ? Number(got[2]) : contentLength - 1;
  const length = range.end - range.start + 1;
  if (gotStart === range.start && gotEnd === range.end) return { body, length };
  if (gotStart > range.start || gotEnd < range.end) {
    await body.cancel().catch(() => {});
    throw errors.upstream('the s3 blob store answered another range than asked');
  }
  return { body: body.pipeThrough(sliceStream(range.start - gotStart, length)), length };
}

/** Passes `take` bytes after skipping `skip`, then ends. */
function sliceStream(skip: number, take: number): TransformStream<Uint8Array, Uint8Array> {
  let pos = 0;
  const end = skip + take;
  return new TransformStream({
    transform(chunk, controller) {
      const from = Math.max(skip - pos, 0);
      const to = Math.min(end - pos, chunk.byteLength);
      if (from < to) controller.enqueue(chunk.subarray(from, to));
      pos += chunk.byteLength;
      if (pos >= end) controller.terminate();
    },
  });
}

/** An ETag without its quotes (the catalog keeps the bare value; GET quotes it again). */
export function unquote(etag: string): string {
  return etag.replace(/^W\//, '').replace(/^"(.*)"$/, '$1');
}

function isMissing(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } } | null;
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}

/** A ServiceError passes through; any SDK or transport failure is 502 naming only the error's kind. */
function translate(err: unknown): ServiceError {
  if (err instanceof ServiceError) return err;
  const name = (err as { name?: string } | null)?.name ?? 'Error';
  return errors.upstream(`the s3 blob store failed (${name})`);
}
