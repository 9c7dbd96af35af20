/**
 * Resumable uploads from the SDK (docs/storage.md "Resumable uploads"; docs/sdk.md "Storage"): the
 * TUS 1.0.0 requests the service speaks, over the client's own transport (fetch only, no other
 * library). The bytes go in chunks of at most one request's limit; a chunk that fails (the network,
 * a 5xx, an agent restarting) is followed by a HEAD that says where the upload stands, and the
 * upload goes on from there. Memory: one chunk of a stream, nothing of a Blob (each chunk is a slice).
 */
import type { Answer, CallOptions, Transport } from './http.ts';
import { backoffMs, isNetworkError, sleep } from './http.ts';
import { SvcError } from './errors.ts';
import * as R from './routes.gen.ts';

/** The bytes of one request at most (the contract's limit), and the chunk sent by default. */
export const SINGLE_REQUEST_BYTES = 32 * 1024 * 1024;
export const DEFAULT_CHUNK_BYTES = 8 * 1024 * 1024;
/** Chunks tried again after a failure before the upload gives up (its URL still resumes it). */
const CHUNK_ATTEMPTS = 5;

/** Options of a resumable upload. */
export interface ResumableOptions extends CallOptions {
  contentType?: string;
  onProgress?: (progress: { loaded: number; total: number | null }) => void;
  /** Bytes per request (default 8 MiB, at most 32 MiB). */
  chunkSize?: number;
  /** The URL of an upload to continue (one `onUploadUrl` gave): it goes on from where it stands. */
  uploadUrl?: string;
  /** Called with the upload's URL once it exists: keep it to resume after an interruption. */
  onUploadUrl?: (url: string) => void;
}

/** What is uploaded: a Blob (sliced), or a stream of a known size (read one chunk at a time). */
export type ResumableSource = Blob | { stream: ReadableStream<Uint8Array>; size: number };

const TUS = { 'tus-resumable': '1.0.0' };

const metadata = (pairs: Record<string, string | undefined>): string =>
  Object.entries(pairs)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([k, v]) => `${k} ${base64(v)}`)
    .join(',');

function base64(text: string): string {
  let bin = '';
  for (const b of new TextEncoder().encode(text)) bin += String.fromCharCode(b);
  return btoa(bin);
}

/** Where a resumable upload stands. */
export interface UploadStatus {
  offset: number;
  length: number;
}

/** `POST …/storage/resumable`: a new upload of `size` bytes to `bucket/key`; answers its absolute URL. */
export async function createUpload(t: Transport, id: string, input: { bucket: string; key: string; size: number; contentType?: string | undefined }, call?: CallOptions): Promise<string> {
  const answer = await t.open(R.storage.createResumable, {
    params: { id },
    headers: { ...TUS, 'upload-length': String(input.size), 'upload-metadata': metadata({ bucket: input.bucket, key: input.key, content_type: input.contentType }) },
  }, call);
  answer.done();
  const location = answer.response.headers.get('location') ?? '';
  // Checked: a path of this service's uploads.
  paramsOf(location);
  return t.url(location);
}

/** `HEAD` of an upload: where it stands, or null once it is gone (completed and expired, terminated, never there). */
export async function uploadStatus(t: Transport, url: string, call?: CallOptions): Promise<UploadStatus | null> {
  let answer: Answer;
  try {
    answer = await t.open(R.storage.headResumable, { params: paramsOf(url), headers: TUS }, call);
  } catch (err) {
    if (err instanceof SvcError && err.status === 404) return null;
    throw err;
  }
  answer.done();
  return { offset: Number(answer.response.headers.get('upload-offset')), length: Number(answer.response.headers.get('upload-length')) };
}

/** `PATCH` of an upload: `body` (`length` bytes) at `offset`; answers the new offset (the object is stored once it is the length). */
export async function appendUpload(t: Transport, url: string, offset: number, body: Blob | Uint8Array<ArrayBuffer>, call?: CallOptions): Promise<number> {
  const length = body instanceof Blob ? body.size : body.byteLength;
  const answer: Answer = await t.open(R.storage.patchResumable, {
    params: paramsOf(url),
    headers: { ...TUS, 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream', 'content-length': String(length) },
    body,
    streaming: true,
  }, call);
  answer.done();
  return Number(answer.response.headers.get('upload-offset') ?? offset + length);
}

/** `DELETE` of an upload: it and its bytes go. */
export async function cancelUpload(t: Transport, url: string, call?: CallOptions): Promise<void> {
  (await t.open(R.storage.deleteResumable, { params: paramsOf(url), headers: TUS }, call)).done();
}

/** Uploads `source` to `bucket/key` of project `id` with TUS; resolves once the object is stored. */
export async function uploadResumable(t: Transport, id: string, bucket: string, key: string, source: ResumableSource, options: ResumableOptions = {}): Promise<void> {
  const size = source.size;
  const chunkSize = Math.min(options.chunkSize ?? DEFAULT_CHUNK_BYTES, SINGLE_REQUEST_BYTES);
  const reader = chunkReader(source);
  let url = options.uploadUrl ?? null;
  let offset = url ? await standing(t, url, size, options) : null;
  if (offset === null || url === null) {
    url = await createUpload(t, id, { bucket, key, size, contentType: options.contentType }, options);
    offset = 0;
    options.onUploadUrl?.(url);
  }
  options.onProgress?.({ loaded: offset, total: size });
  let failures = 0;
  while (offset < size) {
    const end = Math.min(offset + chunkSize, size);
    try {
      offset = await appendUpload(t, url, offset, await reader.bytes(offset, end), options);
      failures = 0;
    } catch (err) {
      // The chunk's fate is unknown: ask where the upload stands, then go on from there.
      if (!retryable(err) || ++failures >= CHUNK_ATTEMPTS || options.signal?.aborted) throw err;
      await sleep(backoffMs(failures - 1), options.signal);
      const now = await standing(t, url, size, options).catch(() => null);
      if (now === null) throw err;
      offset = now;
    }
    reader.forget(offset);
    options.onProgress?.({ loaded: offset, total: size });
  }
}

function retryable(err: unknown): boolean {
  return isNetworkError(err) || (err instanceof SvcError && (err.status === 409 || err.status >= 500));
}

/** The project and upload ids of an upload's URL or path. */
function paramsOf(url: string): { id: string; upload: string } {
  const m = /\/v0\/projects\/(prj_[0-9a-f]{16})\/storage\/resumable\/(upl_[0-9a-f]{16})$/.exec(url.split('?')[0]!);
  if (!m) throw new TypeError(`not the URL of a resumable upload: ${url}`);
  return { id: m[1]!, upload: m[2]! };
}

/** Where the upload stands, or null when it is gone or holds another size. */
async function standing(t: Transport, url: string, size: number, call: CallOptions): Promise<number | null> {
  const status = await uploadStatus(t, url, call);
  return status && status.length === size ? status.offset : null;
}

/**
 * The bytes of `source` from one offset to another: a Blob's slice, or for a stream the chunk
 * it holds (kept until the service acknowledged past it, so a chunk that failed can be sent again).
 */
function chunkReader(source: ResumableSource): { bytes(from: number, to: number): Promise<Blob | Uint8Array<ArrayBuffer>>; forget(upTo: number): void } {
  if (source instanceof Blob) return { bytes: async (from, to) => source.slice(from, to), forget: () => {} };
  const reader = source.stream.getReader();
  let held: Uint8Array<ArrayBuffer> = new Uint8Array(0);
  let heldFrom = 0;
  return {
    async bytes(from, to) {
      if (from < heldFrom) throw new Error('the stream has moved past the offset the service asks for; start the upload again');
      if (heldFrom + held.byteLength < to) {
        const parts: Uint8Array[] = [held];
        let have = heldFrom + held.byteLength;
        while (have < to) {
          const { value } = await reader.read();
          if (!value) throw new Error(`the stream ended at ${have} bytes, before its size`);
          parts.push(value);
          have += value.byteLength;
        }
        held = new Uint8Array(have - heldFrom);
        let at = 0;
        for (const p of parts) {
          held.set(p, at);
          at += p.byteLength;
        }
      }
      return held.subarray(from - heldFrom, to - heldFrom);
    },
    forget(upTo) {
      const drop = Math.min(Math.max(upTo - heldFrom, 0), held.byteLength);
      if (drop === 0) return;
      held = held.slice(drop);
      heldFrom += drop;
    },
  };
}
