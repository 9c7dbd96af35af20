/**
 * The `fs` blob backend as the handlers see it: the files live on the host agent that owns the
 * project (host-agent/blobs/), reached through the internal API with raw streaming bodies both ways
 * (host-agent/routes/blobs.ts). Nothing is buffered here: the request body is piped straight into
 * the internal call, and the agent's answer is handed back as a stream.
 *
 * The agent being unreachable is, from storage's point of view, the blob store being unavailable:
 * 502 `upstream_unavailable` (contract: storage endpoints list `upstream_unavailable`).
 */
import type { AgentClient, AgentTarget } from '../agent-client.ts';
import { ServiceError, errors } from '../errors.ts';
import { internalPaths } from '../internal-paths.ts';
import { countedBody } from './limit.ts';
import type { BlobBytes, BlobPut, BlobStore, BlobWritten, ByteRange } from './store.ts';

/** Internal path of one blob on the agent. */
export function internalBlobPath(project: string, name: string): string {
  return internalPaths.blob(project, name);
}

/** Headers of the internal blob routes (the agent enforces the same limit on its side). */
export const INTERNAL_BLOB_HEADERS = {
  maxBytes: 'x-svc-max-bytes',
  length: 'x-svc-length',
  /** Total size of the blob, on range answers. */
  size: 'x-svc-size',
} as const;

/**
 * The agent of an `fs` store could not be reached at all: 502 `upstream_unavailable` to the client,
 * and to the caller a sign that what it remembers of that agent is stale.
 */
export class BlobAgentUnreachableError extends ServiceError {
  readonly agentId: string;
  constructor(agentId: string) {
    super('upstream_unavailable', `the fs blob store on host agent ${agentId} is unavailable`);
    this.agentId = agentId;
  }
}

/** The `fs` store of the project hosted by `agent`. */
export function agentBlobStore(agents: AgentClient, agent: AgentTarget, requestId?: string): BlobStore {
  const base = requestId ? { requestId } : {};
  const translate = (err: unknown): unknown =>
    err instanceof ServiceError && err.code === 'orchestrator_unavailable' ? new BlobAgentUnreachableError(agent.agent_id) : err;
  return {
    backend: 'fs',

    async put(project: string, name: string, input: BlobPut): Promise<BlobWritten> {
      // The agent counts against the same limit and answers 413 itself, after removing its temp
      // file. A body without a length is counted here too: the agent's 413 cannot overtake a
      // request body that is still being sent to it (workerd's fetch answers once the body is
      // sent), so the count failing here is what ends the upload at once; the agent then sees
      // its body cut off and removes its temp file (docs/storage.md "Streaming and the byte limit").
      const headers: Record<string, string> = {
        'content-type': 'application/octet-stream',
        [INTERNAL_BLOB_HEADERS.maxBytes]: String(input.maxBytes),
      };
      if (input.length !== null) headers[INTERNAL_BLOB_HEADERS.length] = String(input.length);
      const counted = input.length === null ? countedBody(input.body, input.maxBytes, input.signal) : null;
      let written: BlobWritten;
      try {
        written = await agents.json<BlobWritten>(agent, 'PUT', internalBlobPath(project, name), {
          ...base,
          raw: { body: counted?.body ?? input.body, headers },
          signal: input.signal,
        });
      } catch (err) {
        // The body's own failure (413, the client gone) is the one to answer, not the cut call.
        throw counted?.failure() ?? translate(err);
      }
      const failed = counted?.failure();
      if (failed !== undefined) {
        // workerd ends a chunked request body cleanly when its stream fails, so the agent may have
        // stored the bytes before the failure as a whole blob: it is nobody's, remove it.
        await this.delete(project, name).catch(() => {});
        throw failed;
      }
      return written;
    },

    async get(project: string, name: string, range?: ByteRange, signal?: AbortSignal): Promise<BlobBytes | null> {
      const headers: Record<string, string> = {};
      if (range) headers.range = `bytes=${range.start}-${range.end}`;
      let response: Response;
      try {
        response = await agents.fetch(agent, 'GET', internalBlobPath(project, name), { ...base, raw: { body: null, headers }, signal });
      } catch (err) {
        if (err instanceof ServiceError && err.code === 'not_found') return null;
        throw translate(err);
      }
      const length = Number(response.headers.get('content-length'));
      if (!response.body || !Number.isSafeInteger(length)) throw errors.upstream('the fs blob store answered without a body');
      return { body: response.body, length };
    },

    async delete(project: string, name: string): Promise<void> {
      try {
        const response = await agents.fetch(agent, 'DELETE', internalBlobPath(project, name), base);
        await response.body?.cancel();
      } catch (err) {
        throw translate(err);
      }
    },
  };
}
