/**
 * Resumable uploads on the `s3` backend (docs/storage.md "Resumable uploads"): one S3 multipart
 * upload of the final blob's key per upload, created at the POST. S3 takes parts of at least 5 MiB
 * but the last, so a PATCH that brings less (with what is pending before it) and is not the last
 * is kept as the upload's *incomplete part*, an object `uploads/<project>/<upload_id>.<end>.part`, and
 * sent first in the next part (as tusd's S3 store does). Outside `blobs/`, so the sweep of blobs no
 * row names never sees it; the upload's expiry or termination removes it.
 *
 * Every request gives S3 its length (a PATCH's `Content-Length`, plus the incomplete part): a body
 * cut short fails its request and leaves the recorded progress as it was. A part number sent again
 * (after a PATCH that died before its progress was recorded) replaces the part.
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { ServiceError, errors } from '../errors.ts';
import type { ResumableBytes, UploadProgress, UploadTarget } from './multipart.ts';
import type { BlobWritten } from './store.ts';
import { createS3Client, s3KeyOf, unquote, type S3Settings } from './s3.ts';

/** S3's smallest part but the last. */
export const S3_MIN_PART_BYTES = 5 * 1024 * 1024;

/**
 * The S3 key of an upload's incomplete part ending at offset `end`. Named by its end, so a PATCH that
 * died after writing a new one and before its offset was recorded leaves the recorded one intact
 * (the next PATCH from the recorded offset reads that one); the upload's completion, termination or
 * expiry removes them all (`uploads/<project>/<upload_id>.`).
 */
export function s3TailKey(project: string, uploadId: string, end: number): string {
  return `${s3TailPrefix(project, uploadId)}${end}.part`;
}

/** The prefix of every incomplete part an upload ever had. */
function s3TailPrefix(project: string, uploadId: string): string {
  return `uploads/${project}/${uploadId}.`;
}

/** The `s3` bytes of resumable uploads of a deployment, over a client of its own. */
export function s3ResumableBytes(settings: S3Settings): ResumableBytes {
  return createS3ResumableBytes(createS3Client(settings), settings.SVCD_S3_BUCKET);
}

/** The `s3` bytes of resumable uploads over `client` and one S3 bucket. */
export function createS3ResumableBytes(client: S3Client, bucket: string): ResumableBytes {
  const send = async <T>(work: Promise<T>): Promise<T> => {
    try {
      return await work;
    } catch (err) {
      throw translate(err);
    }
  };
  /** The incomplete part's bytes followed by `body`, as one stream of known length. */
  const withTail = async (target: UploadTarget, progress: UploadProgress, body: ReadableStream<Uint8Array>, length: number): Promise<ReadableStream<Uint8Array>> => {
    const tail = progress.tail ?? 0;
    if (tail === 0) return body;
    const out = await send(client.send(new GetObjectCommand({ Bucket: bucket, Key: s3TailKey(target.project, target.uploadId, progress.offset) })));
    if (!out.Body || out.ContentLength !== tail) throw errors.upstream('the s3 blob store lost the incomplete part of an upload');
    return fixedLength(concat(out.Body.transformToWebStream() as ReadableStream<Uint8Array>, body), tail + length);
  };
  return {
    backend: 's3',

    async begin(target) {
      const out = await send(client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: s3KeyOf(target.project, target.blob), ContentType: target.contentType })));
      if (!out.UploadId) throw errors.upstream('the s3 blob store answered no multipart upload id');
      return { multipartId: out.UploadId };
    },

    async append(target, progress, body, length, signal) {
      const parts = progress.parts ?? [];
      const tail = progress.tail ?? 0;
      if (length === 0) {
        await body.cancel().catch(() => {});
        return progress;
      }
      const size = tail + length;
      const last = progress.offset + length === target.length;
      const stream = await withTail(target, progress, body, length);
      if (size < S3_MIN_PART_BYTES && !last) {
        const key = s3TailKey(target.project, target.uploadId, progress.offset + length);
        await send(client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: stream, ContentLength: size }), { abortSignal: signal }));
        return { ...progress, offset: progress.offset + length, tail: size };
      }
      const n = parts.length + 1;
      const out = await send(
        client.send(
          new UploadPartCommand({ Bucket: bucket, Key: s3KeyOf(target.project, target.blob), UploadId: progress.multipartId, PartNumber: n, Body: stream, ContentLength: size }),
          { abortSignal: signal },
        ),
      );
      if (!out.ETag) throw errors.upstream('the s3 blob store answered a part without an ETag');
      return { ...progress, offset: progress.offset + length, parts: [...parts, { n, etag: out.ETag, size }], tail: 0 };
    },

    finish: (target, progress) => finishUpload(client, bucket, target, progress),

    async abort(target, progress) {
      await abortQuietly(client, bucket, s3KeyOf(target.project, target.blob), progress.multipartId);
      await send(dropTails(client, bucket, target));
    },
  };
}

/** Completes the multipart upload (or, for 0 bytes, writes the empty blob); the blob already there answers the same. */
async function finishUpload(client: S3Client, bucket: string, target: UploadTarget, progress: UploadProgress): Promise<BlobWritten> {
  const key = s3KeyOf(target.project, target.blob);
  const parts = progress.parts ?? [];
  try {
    if (parts.length === 0) {
      // Nothing was ever sent (a 0-byte upload): no part to complete with.
      const out = await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: new Uint8Array(0), ContentLength: 0, ContentType: target.contentType }));
      await abortQuietly(client, bucket, key, progress.multipartId);
      return { size: 0, etag: unquote(out.ETag ?? '') };
    }
    const out = await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: key,
        UploadId: progress.multipartId,
        MultipartUpload: { Parts: parts.map((p) => ({ PartNumber: p.n, ETag: p.etag })) },
      }),
    );
    if (!out.ETag) throw errors.upstream('the s3 blob store completed an upload without an ETag');
    await dropTails(client, bucket, target).catch(() => {});
    return { size: target.length, etag: unquote(out.ETag) };
  } catch (err) {
    // Completed before (a crash came between this and the catalog flip): the blob is there.
    const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key })).catch(() => null);
    if (head?.ETag && head.ContentLength === target.length) return { size: target.length, etag: unquote(head.ETag) };
    throw translate(err);
  }
}

/** Deletes every incomplete part the upload ever had. */
async function dropTails(client: S3Client, bucket: string, target: UploadTarget): Promise<void> {
  const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: s3TailPrefix(target.project, target.uploadId) }));
  for (const o of listed.Contents ?? []) if (o.Key) await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: o.Key }));
}

/** Aborts a multipart upload; one already gone (or a store that refuses the abort, as s3rver does) is not an error. */
async function abortQuietly(client: S3Client, bucket: string, key: string, uploadId: string | undefined): Promise<void> {
  if (!uploadId) return;
  await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId })).catch(() => {});
}

/** `first`'s bytes, then `second`'s. */
function concat(first: ReadableStream<Uint8Array>, second: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  let reader = first.getReader();
  let onSecond = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        const { done, value } = await reader.read();
        if (!done) return controller.enqueue(value);
        if (onSecond) return controller.close();
        onSecond = true;
        reader = second.getReader();
      }
    },
    cancel: async (reason) => {
      await reader.cancel(reason);
      if (!onSecond) await second.cancel(reason);
    },
  });
}

/** workerd sends a stream of its own making with its length only through a FixedLengthStream. */
function fixedLength(stream: ReadableStream<Uint8Array>, length: number): ReadableStream<Uint8Array> {
  const Fixed = (globalThis as { FixedLengthStream?: new (n: number) => TransformStream<Uint8Array, Uint8Array> }).FixedLengthStream;
  return Fixed ? stream.pipeThrough(new Fixed(length)) : stream;
}

/** A ServiceError passes through; any SDK failure is 502 naming only the error's kind. */
function translate(err: unknown): ServiceError {
  if (err instanceof ServiceError) return err;
  const name = (err as { name?: string } | null)?.name ?? 'Error';
  return errors.upstream(`the s3 blob store failed (${name})`);
}
