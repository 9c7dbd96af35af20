/**
 * The blob-store interface (docs/storage.md): where object bytes live, behind the catalog.
 * Two backends implement it: `s3` (shared/blobs/s3.ts, any S3-compatible endpoint) and `fs` (the
 * host agent's files, reached from the handlers through the internal API, shared/blobs/agent.ts).
 *
 * Blobs are immutable: every write gets a fresh name (shared/blobs/names.ts) and is never
 * overwritten, so a catalog row can only ever point at complete bytes. Web-standard APIs only: the
 * handlers run in workerd.
 */

/** The backends a deployment can choose (`SVCD_BLOB_BACKEND`). */
export type BlobBackend = 'fs' | 's3';

/** What the store reports about a completed write: the catalog row takes both verbatim. */
export interface BlobWritten {
  size: number;
  /** S3's ETag without its quotes (`s3`), or the SHA-256 hex of the bytes (`fs`). */
  etag: string;
}

/** An inclusive, already validated byte range `start..end` of a blob. */
export interface ByteRange {
  start: number;
  end: number;
}

/** Bytes read from the store: a stream of exactly `length` bytes. */
export interface BlobBytes {
  body: ReadableStream<Uint8Array>;
  length: number;
}

/** One write. */
export interface BlobPut {
  body: ReadableStream<Uint8Array>;
  /** The declared length (`Content-Length`), or null when the client streams without one. */
  length: number | null;
  /** More bytes than this fail with 413 `payload_too_large` and store nothing. */
  maxBytes: number;
  contentType: string;
  signal?: AbortSignal;
}

/** A blob store. `project` and `name` are validated identifiers, never user-chosen text. */
export interface BlobStore {
  readonly backend: BlobBackend;
  /** Streams `input.body` into a new blob `name`; nothing remains when it throws. */
  put(project: string, name: string, input: BlobPut): Promise<BlobWritten>;
  /** Streams the blob (or `range` of it), or answers null when the store has no such blob. */
  get(project: string, name: string, range?: ByteRange, signal?: AbortSignal): Promise<BlobBytes | null>;
  /** Removes the blob; removing a missing blob is not an error. */
  delete(project: string, name: string): Promise<void>;
}
