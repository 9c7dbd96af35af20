/**
 * The `s3` blob backend: any S3-compatible endpoint through @aws-sdk/client-s3 (docs/storage.md
 * "The `s3` backend").
 *
 * - The client is built with `requestChecksumCalculation`/`responseChecksumValidation` set to
 *   `WHEN_REQUIRED`: with the defaults, S3-compatible stores such as s3rver store the aws-chunked
 *   trailer inside the object.
 * - Requests go through the SDK's fetch handler everywhere (workerd, and Node for tests and the Node
 *   adapter), because the Node handler cannot send a web ReadableStream body: one streaming path.
 * - A body with a declared length is streamed in one PutObject; a body without one is sent as a
 *   multipart upload of bounded parts (S3 needs a length per request), so memory stays bounded
 *   either way. The ETag is the store's answer to the write; the size is the byte count the store
 *   acknowledged (it checks every request's length).
 * - Blob keys are `blobs/<project>/<name>`: `name` is a hash (shared/blobs/names.ts), never the key.
 * - SDK failures are translated here: a missing object is `null`, anything else is 502
 *   `upstream_unavailable` naming the S3 error, never its message (docs/api.md "Errors").
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { FetchHttpHandler } from '@smithy/fetch-http-handler';
import type { Settings } from '../config.ts';
import { ServiceError, errors } from '../errors.ts';
import { tooLargeError } from './limit.ts';
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

const stores = new WeakMap<S3Settings, BlobStore>();

/** The `s3` store of a deployment, built on first use and reused (one client per isolate). */
export function s3BlobStore(settings: S3Settings): BlobStore {
  let store = stores.get(settings);
  if (!store) {
    store = createS3BlobStore(createS3Client(settings), settings.SVCD_S3_BUCKET);
    stores.set(settings, store);
  }
  return store;
}

/** An `s3` store over `client` and one S3 bucket. */
export function createS3BlobStore(client: S3Client, bucket: string): BlobStore {
  async function head(key: string): Promise<BlobWritten> {
    const out = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    if (typeof out.ContentLength !== 'number' || !out.ETag) throw errors.upstream('the s3 blob store answered without a size or ETag');
    return { size: out.ContentLength, etag: unquote(out.ETag) };
  }

  /**
   * Sends a body of unknown length, counting it against the limit as it is read (the part buffer
   * is where the bytes go anyway: no extra stream stage). Answers the store's ETag and the size.
   */
  async function putWithoutLength(key: string, body: ReadableStream<Uint8Array>, input: BlobPut): Promise<{ etag?: string; size: number }> {
    const reader = body.getReader();
    let size = 0;
    // One part buffer, reused: each part is sent before the next is read (bounded memory). A limit
    // below the part size never fills it, since the counting stream fails first.
    const part = new Uint8Array(Math.min(S3_PART_BYTES, input.maxBytes + 1));
    let filled = 0;
    let uploadId: string | undefined;
    const parts: { PartNumber: number; ETag: string }[] = [];
    const opts = { abortSignal: input.signal };
    const sendPart = async () => {
      if (!uploadId) {
        const created = await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ContentType: input.contentType }), opts);
        uploadId = created.UploadId;
        if (!uploadId) throw errors.upstream('the s3 blob store did not start a multipart upload');
      }
      const PartNumber = parts.length + 1;
      const out = await client.send(
        new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: uploadId, PartNumber, Body: part.subarray(0, filled), ContentLength: filled }),
        opts,
      );
      if (!out.ETag) throw errors.upstream('the s3 blob store answered a part without an ETag');
      parts.push({ PartNumber, ETag: out.ETag });
      filled = 0;
    };
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > input.maxBytes) throw tooLargeError(input.maxBytes);
        let at = 0;
        while (at < value.byteLength) {
          if (filled === part.byteLength) await sendPart();
          const n = Math.min(part.byteLength - filled, value.byteLength - at);
          part.set(value.subarray(at, at + n), filled);
          filled += n;
          at += n;
        }
      }
      if (!uploadId) {
        // The whole body fit one part: a plain PutObject.
        const out = await client.send(
          new PutObjectCommand({ Bucket: bucket, Key: key, Body: part.subarray(0, filled), ContentLength: filled, ContentType: input.contentType }),
          opts,
        );
        return { etag: out.ETag, size };
      }
      if (filled > 0) await sendPart();
      const out = await client.send(
        new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts: parts } }),
        opts,
      );
      return { etag: out.ETag, size };
    } catch (err) {
      reader.cancel(err).catch(() => {});
      if (uploadId) {
        await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId })).catch(() => {});
      }
      throw err;
    }
  }

  return {
    backend: 's3',

    async put(project: string, name: string, input: BlobPut): Promise<BlobWritten> {
      const key = s3KeyOf(project, name);
      if (input.length !== null && input.length > input.maxBytes) throw tooLargeError(input.maxBytes);
      let written = false;
      try {
        let etag: string | undefined;
        let size: number;
        if (input.length !== null) {
          // A declared length bounds the body already (the HTTP layer delimits it, and the store
          // checks it), so the request body goes to the store untouched: in workerd a stream stage
          // written in JavaScript would cost most of the throughput and lose the length.
          const out = await client.send(
            new PutObjectCommand({
              Bucket: bucket,
              Key: key,
              Body: input.length === 0 ? new Uint8Array(0) : input.body,
              ContentLength: input.length,
              ContentType: input.contentType,
            }),
            { abortSignal: input.signal },
          );
          if (input.length === 0) await input.body.cancel().catch(() => {});
          etag = out.ETag;
          size = input.length;
        } else {
          ({ etag, size } = await putWithoutLength(key, input.body, input));
        }
        written = true;
        // The store acknowledged exactly these bytes (it checks every request's length); a store
        // that answers no ETag is asked for both.
        return etag ? { size, etag: unquote(etag) } : await head(key);
      } catch (err) {
        if (written) await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key })).catch(() => {});
        throw translate(err);
      }
    },

    async get(project: string, name: string, range?: ByteRange, signal?: AbortSignal): Promise<BlobBytes | null> {
      try {
        const out = await client.send(
          new GetObjectCommand({
            Bucket: bucket,
            Key: s3KeyOf(project, name),
            ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}),
          }),
          { abortSignal: signal },
        );
        if (!out.Body || typeof out.ContentLength !== 'number') throw errors.upstream('the s3 blob store answered without a body');
        const body = out.Body.transformToWebStream() as ReadableStream<Uint8Array>;
        if (!range) return { body, length: out.ContentLength };
        // A store may answer more than the range asked (RFC 9110 lets it ignore Range; s3rver
        // answers `bytes=0-0` with the whole object): cut the answer down to the range.
        const got = /^bytes (\d+)-(\d+)\/\d+$/.exec(out.ContentRange ?? '');
        const gotStart = got ? Number(got[1]) : 0;
        const gotEnd = got ? Number(got[2]) : out.ContentLength - 1;
        const length = range.end - range.start + 1;
        if (gotStart === range.start && gotEnd === range.end) return { body, length };
        if (gotStart > range.start || gotEnd < range.end) {
          await body.cancel().catch(() => {});
          throw errors.upstream('the s3 blob store answered another range than asked');
        }
        return { body: body.pipeThrough(sliceStream(range.start - gotStart, length)), length };
      } catch (err) {
        if (isMissing(err)) return null;
        throw translate(err);
      }
    },

    async delete(project: string, name: string): Promise<void> {
      try {
        await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: s3KeyOf(project, name) }));
      } catch (err) {
        if (isMissing(err)) return;
        throw translate(err);
      }
    },
  };
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
