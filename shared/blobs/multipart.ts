/**
 * The bytes of resumable uploads (docs/storage.md "Resumable uploads"), behind one interface for
 * both backends: `fs` appends to one file on the project's agent (this module, through the internal
 * API; host-agent/blobs/resumable.ts), `s3` makes an S3 multipart upload (./multipart-s3.ts).
 *
 * The caller (handlers/domain/objects/resumable.ts) keeps the upload's state in its record and
 * records what `append` answers only once it has answered: every answer is about durable bytes.
 * Web-standard only: the handlers run in workerd.
 */
import type { AgentClient, AgentTarget } from '../agent-client.ts';
import { ServiceError } from '../errors.ts';
import { internalPaths } from '../internal-paths.ts';
import { BlobAgentUnreachableError } from './agent.ts';
import type { BlobBackend, BlobWritten } from './store.ts';

/** One part of an `s3` upload's multipart upload. */
export interface UploadPart {
  n: number;
  etag: string;
  size: number;
}

/** What an upload is to become. */
export interface UploadTarget {
  project: string;
  uploadId: string;
  /** The blob the completed upload becomes (shared/blobs/names.ts). */
  blob: string;
  contentType: string;
  /** `Upload-Length`. */
  length: number;
}

/** How far an upload got, as its record holds it. */
export interface UploadProgress {
  offset: number;
  /** `s3`: the multipart upload, its parts, and the bytes of its incomplete part (0: none). */
  multipartId?: string;
  parts?: UploadPart[];
  tail?: number;
}

/** The bytes of resumable uploads in one backend. */
export interface ResumableBytes {
  readonly backend: BlobBackend;
  /** Prepares a new upload (`s3`: creates the multipart upload); answers what its record keeps. */
  begin(target: UploadTarget): Promise<{ multipartId?: string }>;
  /** Appends exactly `length` bytes of `body` after `progress`; answers the progress once durable. */
  append(target: UploadTarget, progress: UploadProgress, body: ReadableStream<Uint8Array>, length: number, signal?: AbortSignal): Promise<UploadProgress>;
  /** Makes the complete upload its blob; answers what a PUT's store would. Again after it did: the same. */
  finish(target: UploadTarget, progress: UploadProgress): Promise<BlobWritten>;
  /** Removes whatever bytes the upload holds (not its blob once finished). */
  abort(target: UploadTarget, progress: UploadProgress): Promise<void>;
}

/** Headers of the internal upload routes (host-agent/routes/resumable.ts). */
export const RESUMABLE_HEADERS = {
  offset: 'x-svc-offset',
  length: 'x-svc-length',
  name: 'x-svc-name',
} as const;

/** The `fs` bytes of the uploads of projects hosted by `agent`. */
export function agentResumableBytes(agents: AgentClient, agent: AgentTarget, requestId?: string): ResumableBytes {
  const base = requestId ? { requestId } : {};
  const call = async <T>(work: Promise<T>): Promise<T> => {
    try {
      return await work;
    } catch (err) {
      throw err instanceof ServiceError && err.code === 'orchestrator_unavailable' ? new BlobAgentUnreachableError(agent.agent_id) : err;
    }
  };
  return {
    backend: 'fs',
    begin: async () => ({}),
    async append(target, progress, body, length, signal) {
      const headers = { 'content-type': 'application/octet-stream', [RESUMABLE_HEADERS.offset]: String(progress.offset), [RESUMABLE_HEADERS.length]: String(length) };
      const path = internalPaths.upload(target.project, target.uploadId);
      const { offset } = await call(agents.json<{ offset: number }>(agent, 'PATCH', path, { ...base, raw: { body, headers }, signal }));
      return { offset };
    },
    finish: (target) =>
      call(
        agents.json<BlobWritten>(agent, 'POST', internalPaths.uploadFinish(target.project, target.uploadId), {
          ...base,
          raw: { body: null, headers: { [RESUMABLE_HEADERS.name]: target.blob, [RESUMABLE_HEADERS.length]: String(target.length) } },
        }),
      ),
    async abort(target) {
      await call(agents.json(agent, 'DELETE', internalPaths.upload(target.project, target.uploadId), base));
    },
  };
}
