/**
 * Object storage of one project (the interface contract's storage endpoints; docs/storage.md;
 * docs/sdk.md "Storage"): buckets, tickets, streaming upload and download, listing as pages, delete.
 * Bytes are never gathered in memory: an upload sends the caller's stream or Blob as it is read, a
 * download answers the response's stream.
 */
import { encodeObjectKey } from '../shared/object-path.ts';
import { withCleanup, type CallOptions } from './http.ts';
import { listPages, type Pages } from './pages.ts';
import { ProjectApi } from './project-apis.ts';
import { appendUpload, cancelUpload, createUpload, DEFAULT_CHUNK_BYTES, SINGLE_REQUEST_BYTES, uploadResumable, uploadStatus, type ResumableOptions, type UploadStatus } from './resumable.ts';
import * as R from './routes.gen.ts';
import type {
  Bucket,
  BucketsPage,
  DownloadTicket,
  DownloadTicketInput,
  ObjectRow,
  ObjectsPage,
  PageInput,
  UploadTicket,
  UploadTicketInput,
} from './types.ts';

/** True in a browser page or worker (not in Node, Deno or Bun, whose fetch streams request bodies over HTTP/1.1). */
const IN_BROWSER = typeof (globalThis as { XMLHttpRequest?: unknown }).XMLHttpRequest === 'function' && typeof (globalThis as { process?: unknown }).process === 'undefined';

/** What `upload` sends: bytes, text, a Blob (a file: `fs.openAsBlob` in Node) or a stream of bytes. */
export type UploadBody = ReadableStream<Uint8Array> | Blob | ArrayBuffer | Uint8Array | string;

/** Options of `upload`. */
export interface UploadOptions extends CallOptions {
  /** Stored as the object's content type (default: the Blob's type, else `application/octet-stream`). */
  contentType?: string;
  /** Called as bytes are handed to the network, with the count so far and the total when known. */
  onProgress?: (progress: { loaded: number; total: number | null }) => void;
  /** The length of a stream body, when known: sent as `Content-Length` (Node), so the service can refuse an oversized body at once. */
  size?: number;
  /** Store only if the object's current etag is this one (RFC 9110 `If-Match`); else 409 `conflict`. */
  ifMatch?: string;
  /** `*`: store only if no object has this key yet (RFC 9110 `If-None-Match`); else 409 `conflict`. */
  ifNoneMatch?: '*';
  /**
   * Bytes above which the upload is resumable, in chunks (docs/storage.md "Resumable uploads"):
   * default the single-request limit, 32 MiB (in a browser, one chunk: 8 MiB). Needs a known size
   * (a Blob, or `size` with a stream); not with `ifMatch`/`ifNoneMatch`.
   */
  resumableAbove?: number;
  /** Resumable uploads: bytes per request, the URL of an upload to continue, and where to hear of a new one's. */
  chunkSize?: ResumableOptions['chunkSize'];
  uploadUrl?: ResumableOptions['uploadUrl'];
  onUploadUrl?: ResumableOptions['onUploadUrl'];
}

/** Options of `download`. */
export interface DownloadOptions extends CallOptions {
  /** An RFC 9110 range such as `bytes=0-1023`. */
  range?: string;
  /** Answer `notModified` when the object's ETag is this one (as read from a previous download). */
  ifNoneMatch?: string;
  /** Answer `notModified` when the object has not changed since this time. */
  ifModifiedSince?: Date;
  /** With `range`: the range only if the object's etag is still this one, else the whole object. */
  ifRange?: string;
}

/** An object's bytes as a stream, with what its headers say. */
export interface Download {
  /** The bytes; read or cancel it. Null for a 304. */
  body: ReadableStream<Uint8Array> | null;
  status: 200 | 206 | 304;
  /** True for a 304 (`ifNoneMatch` matched). */
  notModified: boolean;
  /** Bytes in `body` (the whole object, or the range). */
  size: number | null;
  contentType: string | null;
  /** The object's etag, without quotes. */
  etag: string | null;
  objectId: string | null;
  /** `bytes start-end/size` for a range. */
  contentRange: string | null;
}

/** What a HEAD of an object tells without its bytes. */
export interface ObjectHead {
  size: number;
  contentType: string;
  etag: string;
  objectId: string;
  lastModified: string | null;
}

/** Options of `list`. */
export interface ListObjectsInput extends PageInput {
  /** Only keys starting with this. */
  prefix?: string;
  /** Roll keys up at this after the prefix, S3 style: they come back in `common_prefixes`. */
  delimiter?: string;
}

/** The path of an object on the service origin, as the tickets name it (docs/storage.md "Key in the path"). */
export { objectPath } from '../shared/object-path.ts';

/** The storage methods of one project. */
export class StorageClient extends ProjectApi {
  /** The path parameters of an object's routes. */
  #object(bucket: string, key: string): { id: string; bucket: string; key: string } {
    return { ...this.project, bucket, key: encodeObjectKey(key) };
  }

  /** `PUT …/storage/buckets/{bucket}`: creates the bucket, or answers the existing one. */
  createBucket(name: string, call?: CallOptions): Promise<Bucket> {
    return this.t.call(R.storage.putBucket, { params: { ...this.project, bucket: name } }, call);
  }

  /**
   * `DELETE …/storage/buckets/{bucket}`: removes an empty bucket (409 `conflict` otherwise); with
   * `force`, every object in it first (each receipted).
   */
  deleteBucket(name: string, options: { force?: boolean } & CallOptions = {}): Promise<Bucket> {
    const { force, ...call } = options;
    return this.t.call(R.storage.deleteBucket, { params: { ...this.project, bucket: name }, query: { force: force ? 'true' : undefined } }, call);
  }

  /** `GET …/storage/buckets`: the project's buckets, by name, page by page. */
  listBuckets(input: PageInput = {}, call?: CallOptions): Pages<BucketsPage, Bucket> {
    return listPages(this.t, R.storage.listBuckets, input, call, (p) => p.buckets, { params: this.project });
  }

  /** `POST …/storage/uploads`: reserves a pending row and says where to PUT the bytes. */
  uploadTicket(input: UploadTicketInput, call?: CallOptions): Promise<UploadTicket> {
    return this.t.call(R.storage.uploadTicket, { params: this.project, json: input }, call);
  }

  /** `POST …/storage/downloads`: where to GET an object's bytes, with its row. */
  downloadTicket(input: DownloadTicketInput, call?: CallOptions): Promise<DownloadTicket> {
    return this.t.call(R.storage.downloadTicket, { params: this.project, json: input }, call);
  }

  /**
   * `PUT …/storage/objects/{bucket}/{key}`: stores the bytes, streamed; answers the catalog row. A
   * larger body (or one in a browser) goes as a resumable upload (`resumableAbove`).
   */
  async upload(bucket: string, key: string, body: UploadBody, options: UploadOptions = {}): Promise<ObjectRow> {
    const { onProgress } = options;
    const sent: ReadableStream<Uint8Array> | Blob = body instanceof ReadableStream || body instanceof Blob ? body : blobOf(body);
    const total = sent instanceof Blob ? sent.size : (options.size ?? null);
    const contentType = options.contentType ?? (body instanceof Blob && body.type ? body.type : undefined);
    const headers: Record<string, string> = {};
    if (contentType) headers['content-type'] = contentType;
    if (options.ifMatch) headers['if-match'] = quote(options.ifMatch);
    if (options.ifNoneMatch) headers['if-none-match'] = options.ifNoneMatch;
    let payload: Blob | ReadableStream<Uint8Array> = sent;
    // Above one request's limit, or in a browser (no streamed body, no progress from fetch), a body
    // of known size goes as a resumable upload: chunks, each resent from where the service stands.
    const above = options.resumableAbove ?? (IN_BROWSER ? DEFAULT_CHUNK_BYTES : SINGLE_REQUEST_BYTES);
    if (total !== null && (total > above || options.uploadUrl) && !options.ifMatch && !options.ifNoneMatch) {
      const source = sent instanceof Blob ? sent : { stream: sent, size: total };
      await uploadResumable(this.t, this.project.id, bucket, key, source, { ...options, ...(contentType ? { contentType } : {}) });
      return (await this.downloadTicket({ bucket, key }, options)).object;
    }
    if (sent instanceof Blob && IN_BROWSER) {
      // A browser sends a streamed body only over HTTP/2 (WHATWG Fetch "duplex") and fetch reports no
      // upload progress: the Blob goes as it is, and progress is reported at its start and its end
      // (docs/sdk.md "Storage"; the console uses XMLHttpRequest for a live bar).
      onProgress?.({ loaded: 0, total });
      const row = await this.t.call(R.storage.putObject, { params: this.#object(bucket, key), body: sent, headers, streaming: true }, options);
      onProgress?.({ loaded: sent.size, total });
      return row;
    }
    if (onProgress || sent instanceof ReadableStream) {
      const stream = sent instanceof Blob ? sent.stream() : sent;
      payload = onProgress ? stream.pipeThrough(counter(total, onProgress)) : stream;
      // Node's fetch sends a stream with this length instead of chunked (browsers decide themselves).
      if (total !== null) headers['content-length'] = String(total);
    }
    return this.t.call(R.storage.putObject, { params: this.#object(bucket, key), body: payload, headers, streaming: true }, options);
  }

  /**
   * `POST …/storage/resumable`: a resumable upload of `size` bytes to `bucket/key` (TUS 1.0;
   * docs/storage.md "Resumable uploads"); answers its URL, for `appendUpload`, `uploadStatus` and
   * `cancelUpload` (`upload` does all of it for a Blob or a sized stream).
   */
  createUpload(bucket: string, key: string, size: number, options: { contentType?: string } & CallOptions = {}): Promise<string> {
    return createUpload(this.t, this.project.id, { bucket, key, size, contentType: options.contentType }, options);
  }

  /** `HEAD` of a resumable upload: its offset and length, or null once it is gone. */
  uploadStatus(url: string, call?: CallOptions): Promise<UploadStatus | null> {
    return uploadStatus(this.t, url, call);
  }

  /** `PATCH` of a resumable upload: `bytes` at `offset` (at most 32 MiB); answers the new offset. */
  appendUpload(url: string, offset: number, bytes: Blob | Uint8Array<ArrayBuffer>, call?: CallOptions): Promise<number> {
    return appendUpload(this.t, url, offset, bytes, call);
  }

  /** `DELETE` of a resumable upload: it and its bytes go. */
  cancelUpload(url: string, call?: CallOptions): Promise<void> {
    return cancelUpload(this.t, url, call);
  }

  /** `GET …/storage/objects/{bucket}/{key}`: the object's bytes as a stream. */
  async download(bucket: string, key: string, options: DownloadOptions = {}): Promise<Download> {
    const headers: Record<string, string> = {};
    if (options.range) headers.range = options.range;
    if (options.ifNoneMatch) headers['if-none-match'] = quote(options.ifNoneMatch);
    if (options.ifModifiedSince) headers['if-modified-since'] = options.ifModifiedSince.toUTCString();
    if (options.ifRange) headers['if-range'] = quote(options.ifRange);
    const { response, done } = await this.t.open(R.storage.getObject, { params: this.#object(bucket, key), headers, streaming: true }, options);
    const status = response.status as Download['status'];
    const length = response.headers.get('content-length');
    const body = status === 304 || !response.body ? null : withCleanup(response.body, done);
    if (!body) done();
    return {
      body,
      status,
      notModified: status === 304,
      size: length === null ? null : Number(length),
      contentType: response.headers.get('content-type'),
      etag: unquote(response.headers.get('etag')),
      objectId: response.headers.get('x-svc-object-id'),
      contentRange: response.headers.get('content-range'),
    };
  }

  /** `HEAD …/storage/objects/{bucket}/{key}`: size, type and etag without the bytes. */
  async head(bucket: string, key: string, call?: CallOptions): Promise<ObjectHead> {
    const { response, done } = await this.t.open(R.storage.headObject, { params: this.#object(bucket, key) }, call);
    done();
    const h = response.headers;
    return {
      size: Number(h.get('content-length') ?? 0),
      contentType: h.get('content-type') ?? '',
      etag: unquote(h.get('etag')) ?? '',
      objectId: h.get('x-svc-object-id') ?? '',
      lastModified: h.get('last-modified'),
    };
  }

  /** `GET …/storage/objects?bucket=`: the bucket's objects, sorted by key, page by page. */
  list(bucket: string, input: ListObjectsInput = {}, call?: CallOptions): Pages<ObjectsPage, ObjectRow> {
    const query = { bucket, prefix: input.prefix, delimiter: input.delimiter };
    return listPages(this.t, R.storage.listObjects, input, call, (p) => p.objects, { params: this.project, query });
  }

  /** `DELETE …/storage/objects`: removes the object's row and bytes; answers the removed row. */
  delete(bucket: string, key: string, call?: CallOptions): Promise<ObjectRow> {
    return this.t.call(R.storage.deleteObject, { params: this.project, json: { bucket, key } }, call);
  }
}

function blobOf(bytes: Uint8Array | ArrayBuffer | string): Blob {
  return new Blob([bytes as Uint8Array<ArrayBuffer> | string]);
}

function quote(etag: string): string {
  return `"${etag.replace(/^"|"$/g, '')}"`;
}

function unquote(etag: string | null): string | null {
  return etag === null ? null : etag.replace(/^W\//, '').replace(/^"|"$/g, '');
}

/** A pass-through that reports how many bytes went by. */
function counter(total: number | null, onProgress: NonNullable<UploadOptions['onProgress']>): TransformStream<Uint8Array, Uint8Array> {
  let loaded = 0;
  return new TransformStream({
    transform(chunk, controller) {
      loaded += chunk.byteLength;
      controller.enqueue(chunk);
      onProgress({ loaded, total });
    },
  });
}
