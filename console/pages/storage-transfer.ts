/**
 * The storage page's transfers (docs/console.md "Storage uploads"). A file up to
 * `RESUMABLE_ABOVE` is one `PUT …/storage/objects/{bucket}/{key}` sent with XMLHttpRequest, the one
 * browser API that reports upload progress (fetch reports none, and a streamed fetch body needs
 * HTTP/2). A larger one goes through the TUS 1.0 resumable route (docs/storage.md "Resumable
 * uploads") with tus-js-client, in `CHUNK_BYTES` pieces: a piece that fails on the network is sent
 * again after a pause (`RETRY_DELAYS_MS`), and when those run out the upload is kept so that
 * **Resume** carries on from the offset the service holds. Neither leaves a pending row behind: the
 * PUT needs no ticket, and a resumable upload makes its row only when its last byte arrived.
 */
import { Upload } from 'tus-js-client';
import { objectPath, type ObjectRow, type ProjectClient } from '../../client/index.ts';
import { errorOfAnswer } from '../http.ts';
import type { ConsoleSession } from '../session.ts';

/** Files larger than this go through the resumable route. */
export const RESUMABLE_ABOVE = 8 * 1024 * 1024;
/** The size of each resumable piece (the contract's body limit is 32 MiB). */
export const CHUNK_BYTES = 8 * 1024 * 1024;
/** Pauses before a failed piece is sent again; then the upload waits for **Resume**. */
export const RETRY_DELAYS_MS = [0, 1000, 3000, 6000];
/** The single-request limit: a file above it cannot fall back to a PUT (docs/storage.md "Limits"). */
const SINGLE_PUT_MAX = 32 * 1024 * 1024;

/** Where an object goes. */
export interface Target {
  bucket: string;
  key: string;
  contentType: string;
}

/** A transfer in progress, as the page shows it. */
export interface TransferProgress {
  loaded: number;
  total: number;
  /** `put` or `resumable`. */
  via: 'put' | 'resumable';
  /** Set while a failed piece waits to be sent again. */
  retrying?: boolean;
}

/** An upload under way: its completion, how to stop it, and (resumable only) how to go on after a failure. */
export interface Sending {
  done: Promise<void>;
  abort(): void;
  /** Carries a failed resumable upload on from the service's offset; null for a PUT. */
  resume: (() => Sending) | null;
}

/** Starts sending `file` to `target`, reporting progress. */
export function sendFile(project: ProjectClient, session: ConsoleSession, target: Target, file: Blob, onProgress: (p: TransferProgress) => void): Sending {
  if (file.size > RESUMABLE_ABOVE) return sendResumable(project, session, target, file, onProgress, null);
  return putWithProgress(objectPath(project.id, target.bucket, target.key), file, { 'content-type': target.contentType, authorization: `Bearer ${session.token}` }, (loaded) =>
    onProgress({ loaded, total: file.size, via: 'put' }),
  );
}

/** A resumable upload with tus-js-client; `existing` is the same upload to carry on (Resume). */
function sendResumable(
  project: ProjectClient,
  session: ConsoleSession,
  target: Target,
  file: Blob,
  onProgress: (p: TransferProgress) => void,
  existing: Upload | null,
): Sending {
  let upload = existing;
  let loaded = 0;
  const done = new Promise<void>((resolve, reject) => {
    const options: Upload['options'] = {
      ...(existing?.options ?? {}),
      endpoint: `${location.origin}/v0/projects/${encodeURIComponent(project.id)}/storage/resumable`,
      headers: { authorization: `Bearer ${session.token}` },
      metadata: { bucket: target.bucket, key: target.key, content_type: target.contentType },
      chunkSize: CHUNK_BYTES,
      retryDelays: RETRY_DELAYS_MS,
      // The console keeps nothing beyond the tab (docs/console.md "Session"): no fingerprint in localStorage.
      storeFingerprintForResuming: false,
      onProgress: (sent, total) => {
        loaded = sent;
        onProgress({ loaded, total, via: 'resumable' });
      },
      onShouldRetry: (err, _attempt, opts) => {
        const status = (err as { originalResponse?: { getStatus(): number } | null }).originalResponse?.getStatus() ?? 0;
        // The default rule (network failures and 5xx, 409 and 423 again), and the bar says so.
        const retry = status === 0 || status >= 500 || status === 409 || status === 423;
        if (retry) onProgress({ loaded, total: file.size, via: 'resumable', retrying: true });
        return retry && opts.retryDelays !== null;
      },
      onSuccess: () => resolve(),
      onError: (err) => reject(tusError(err)),
    };
    if (existing) {
      existing.options = options;
      existing.start();
    } else {
      upload = new Upload(file, options);
      upload.start();
    }
  }).catch(async (err: unknown) => {
    // A service without the resumable route: a file small enough still goes as one PUT.
    if (err instanceof Error && (err as { code?: string }).code === 'not_found' && /^no route/.test(err.message) && file.size <= SINGLE_PUT_MAX) {
      const put = putWithProgress(objectPath(project.id, target.bucket, target.key), file, { 'content-type': target.contentType, authorization: `Bearer ${session.token}` }, (loaded) =>
        onProgress({ loaded, total: file.size, via: 'put' }),
      );
      return put.done;
    }
    throw err;
  });
  return {
    done,
    abort: () => void upload?.abort(false),
    resume: () => sendResumable(project, session, target, file, onProgress, upload),
  };
}

/** tus-js-client's error as the SvcError the SDK would throw (or a network error). */
function tusError(err: Error): Error {
  const response = (err as { originalResponse?: { getStatus(): number; getBody(): string; getHeader(name: string): string | undefined } | null }).originalResponse;
  if (!response) {
    const at = /at offset (\d+)/.exec(err.message)?.[1];
    return new TypeError(at === undefined ? 'the upload did not reach the service' : `the upload stopped at byte ${at}; Resume goes on from there`);
  }
  return errorOfAnswer(response.getStatus(), response.getBody() ?? '', response.getHeader('x-request-id') ?? null);
}

/** PUTs `body` to `path` on this origin, reporting bytes sent; an error answer becomes a SvcError. */
function putWithProgress(path: string, body: Blob, headers: Record<string, string>, onProgress: (loaded: number) => void): Sending {
  const xhr = new XMLHttpRequest();
  const done = new Promise<void>((resolve, reject) => {
    xhr.open('PUT', path);
    for (const [name, value] of Object.entries(headers)) xhr.setRequestHeader(name, value);
    xhr.upload.onprogress = (e) => onProgress(e.loaded);
    xhr.onerror = () => reject(new TypeError('the upload did not reach the service'));
    xhr.onabort = () => reject(new DOMException('cancelled', 'AbortError'));
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) return resolve();
      reject(errorOfAnswer(xhr.status, xhr.responseText, xhr.getResponseHeader('x-request-id')));
    };
    xhr.send(body);
  });
  return { done, abort: () => xhr.abort(), resume: null };
}

/** An object's bytes read whole into a Blob, reporting bytes read. */
export async function downloadObject(project: ProjectClient, bucket: string, row: ObjectRow, onProgress: (loaded: number, total: number) => void): Promise<Blob> {
  const answer = await project.storage.download(bucket, row.key);
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  let loaded = 0;
  const reader = answer.body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value as Uint8Array<ArrayBuffer>);
    loaded += value.byteLength;
    onProgress(loaded, answer.size ?? row.size);
  }
  return new Blob(chunks, { type: answer.contentType ?? row.content_type });
}

/** Hands a Blob to the browser as a download named `name`. */
export function save(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** Lowercase hex of a digest. */
export function hex(buf: ArrayBuffer): string {
  return [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, '0')).join('');
}
