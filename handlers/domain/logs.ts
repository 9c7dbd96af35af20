/**
 * A tenant's engine log for its owner (docs/observability.md "Engine logs"): read from the project's
 * host agent, which keeps it; the handlers keep nothing. Like every lifecycle call, it never wakes
 * the tenant: a project that never ran has no lines.
 */
import type { LogsAnswer } from '../../shared/schemas/logs.ts';
import { internalPaths } from '../../shared/internal-paths.ts';
import type { Deps } from '../context.ts';
import type { LifecycleCall } from './lifecycle.ts';
import { agentFor } from './placement.ts';

/** What to read: the last `tail` lines, and whether to go on with new ones. */
export interface LogsRequest extends LifecycleCall {
  tail: number;
  /** Set: a stream (the agent's event stream, passed through unbuffered). */
  follow: { signal: AbortSignal } | null;
}

/** The lines, or the event stream when following. */
export type EngineLogs = { kind: 'lines'; answer: LogsAnswer } | { kind: 'stream'; body: ReadableStream<Uint8Array> | null };

/** Reads the engine log of the caller's project from its host agent. */
export async function engineLogs(deps: Deps, input: LogsRequest): Promise<EngineLogs> {
  const agent = await agentFor(deps, input.project, input.prefetched);
  const query = new URLSearchParams({ tail: String(input.tail) });
  const path = internalPaths.projectLogs(input.project.id);
  if (!input.follow) {
    return { kind: 'lines', answer: await deps.agents.json<LogsAnswer>(agent, 'GET', `${path}?${query}`, { requestId: input.requestId }) };
  }
  query.set('follow', '1');
  const upstream = await deps.agents.fetch(agent, 'GET', `${path}?${query}`, { requestId: input.requestId, signal: input.follow.signal });
  return { kind: 'stream', body: upstream.body };
}
