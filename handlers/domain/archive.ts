/**
 * Snapshot archives (docs/lifecycle.md "Export and import"): a snapshot downloaded as one tar, and
 * such a tar imported into a project and restored. Both are the project's agent's work; the
 * handlers check the snapshot's row (404 before the agent is asked) and pass the bytes through,
 * never holding them.
 */
import { errors } from '../../shared/errors.ts';
import { internalPaths } from '../../shared/internal-paths.ts';
import type { Deps } from '../context.ts';
import { deletionOf, snapshotOf, type LifecycleCall } from './lifecycle.ts';
import { agentFor } from './placement.ts';

/** An archive as the agent streams it. */
export interface SnapshotArchive {
  body: ReadableStream<Uint8Array> | null;
  headers: Record<string, string>;
}

/** The snapshot's archive, streamed from the project's agent; 404 for a snapshot the project has not. */
export async function exportSnapshot(deps: Deps, call: LifecycleCall & { snapshotId: string; signal?: AbortSignal }): Promise<SnapshotArchive> {
  await snapshotOf(deps, call.project.id, call.snapshotId);
  const agent = await agentFor(deps, call.project, call.prefetched);
  const response = await deps.agents.fetch(agent, 'GET', internalPaths.snapshotArchive(call.project.id, call.snapshotId), { requestId: call.requestId, signal: call.signal });
  const headers: Record<string, string> = { 'content-type': 'application/x-tar' };
  for (const name of ['content-length', 'content-disposition']) {
    const value = response.headers.get(name);
    if (value !== null) headers[name] = value;
  }
  return { body: response.body, headers };
}

/** The largest archive an import takes, and its 413. */
export function importLimit(deps: Deps): { maxBytes: number; tooLarge: () => Error } {
  const maxBytes = deps.settings.SVCD_IMPORT_MAX_BYTES;
  return { maxBytes, tooLarge: () => errors.tooLarge(`body: the archive exceeds the limit of ${maxBytes} bytes (SVCD_IMPORT_MAX_BYTES)`) };
}

/**
 * Imports the archive `body` into the project (its agent unpacks it, has the engine verify it and
 * restores it); answers the restore answer with the snapshot it became.
 */
export async function importSnapshot(
  deps: Deps,
  call: LifecycleCall & { body: ReadableStream<Uint8Array> | null; length: number | null; signal?: AbortSignal },
): Promise<Record<string, unknown>> {
  const { maxBytes, tooLarge } = importLimit(deps);
  if (call.length !== null && call.length > maxBytes) throw tooLarge();
  const agent = await agentFor(deps, call.project, call.prefetched);
  const query = new URLSearchParams({ state: call.project.state, updated_at: call.project.updated_at, actor: deletionOf(call).actor });
  return deps.agents.json<Record<string, unknown>>(agent, 'POST', `${internalPaths.importArchive(call.project.id)}?${query}`, {
    raw: { body: call.body, headers: { 'content-type': 'application/x-tar', ...(call.length !== null ? { 'content-length': String(call.length) } : {}) } },
    requestId: call.requestId,
    signal: call.signal,
  });
}
