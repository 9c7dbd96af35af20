/**
 * Internal route of a tenant's engine log (docs/observability.md "Engine logs"): the last lines of
 * `logs/<project>/engine.log` (host-agent/tenants/logs.ts), or those lines and then each new one as
 * Server-Sent Events while the caller stays. The handlers check the owner; nothing here writes.
 *
 *   GET /internal/v1/projects/{id}/logs?tail=N           → {project, lines}
 *   GET /internal/v1/projects/{id}/logs?tail=N&follow=1  → text/event-stream: `event: line`, `data:` JSON string
 *
 * The log is rotated by copy-then-truncate: a follower that finds the file shorter than what it has
 * read starts again at its beginning.
 */
import { open, stat } from 'node:fs/promises';
import { internalPaths, ROUTE_PARAMS } from '../../shared/internal-paths.ts';
import { json, pathParam } from '../../shared/http/body.ts';
import { SSE_HEADERS } from '../../shared/realtime/events.ts';
import { LOGS_TAIL_DEFAULT, logsQuerySchema, type LogsAnswer } from '../../shared/schemas/logs.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import { parseOr400 } from '../../shared/validation.ts';
import type { InternalRouter } from '../internal-api.ts';
import { commentFrame, eventFrame } from '../realtime/sse.ts';

/** Most bytes read from the end of the log files for one tail. */
const TAIL_MAX_BYTES = 4 * 1024 * 1024;
/** Longest line answered; a longer one is cut and marked. */
const LINE_MAX_CHARS = 16 * 1024;
/** How often a follower looks for new lines. */
const FOLLOW_POLL_MS = 250;
/** Most bytes a follower reads in one look. */
const FOLLOW_READ_BYTES = 1024 * 1024;
/** A comment keeps idle streams (and the proxies between) open. */
const HEARTBEAT_MS = 15_000;

type Routed = Request & { params: Record<string, string> };

function clip(line: string): string {
  return line.length > LINE_MAX_CHARS ? `${line.slice(0, LINE_MAX_CHARS)}… [line cut at ${LINE_MAX_CHARS} characters]` : line;
}

/** `[start, end)` of `path` as text, or null when it does not exist. */
async function readRange(path: string, start: number, end: number): Promise<string | null> {
  let file;
  try {
    file = await open(path, 'r');
  } catch {
    return null;
  }
  try {
    const buffer = Buffer.alloc(Math.max(0, end - start));
    let got = 0;
    while (got < buffer.length) {
      const { bytesRead } = await file.read(buffer, got, buffer.length - got, start + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return buffer.subarray(0, got).toString('utf8');
  } finally {
    await file.close();
  }
}

async function sizeOf(path: string): Promise<number | null> {
  try {
    return (await stat(path)).size;
  } catch {
    return null;
  }
}

/**
 * The last `n` lines of the live log and, when it holds fewer, of its latest rotated generation,
 * oldest first; at most `TAIL_MAX_BYTES` are read. Also answers the live file's size (where a
 * follower goes on from).
 */
export async function lastLines(live: string, n: number): Promise<{ lines: string[]; size: number }> {
  const lines: string[] = [];
  let budget = TAIL_MAX_BYTES;
  let liveSize = 0;
  for (const [index, path] of [live, `${live}.1`].entries()) {
    const size = await sizeOf(path);
    if (index === 0) liveSize = size ?? 0;
    if (size === null || size === 0 || budget <= 0) continue;
    const start = Math.max(0, size - budget);
    const text = await readRange(path, start, size);
    if (text === null) continue;
    budget -= size - start;
    const parts = text.split('\n');
    if (parts.at(-1) === '') parts.pop();
    // A read that starts inside the file starts inside a line: that part is not a line.
    if (start > 0) parts.shift();
    lines.unshift(...parts.slice(-(n - lines.length)).map(clip));
    if (lines.length >= n) break;
  }
  return { lines: lines.slice(-n), size: liveSize };
}

/** The follow stream: the tail, then new lines as they are written, until `signal` aborts. */
function follow(live: string, tail: string[], from: number, signal: AbortSignal): ReadableStream<Uint8Array> {
  let offset = from;
  let partial = '';
  let timer: NodeJS.Timeout | undefined;
  let beat: NodeJS.Timeout | undefined;
  let closed = false;
  const stop = () => {
    closed = true;
    clearTimeout(timer);
    clearInterval(beat);
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      const send = (line: string) => controller.enqueue(eventFrame(null, 'line', JSON.stringify(clip(line))));
      for (const line of tail) send(line);
      const look = async () => {
        if (closed) return;
        try {
          const size = await sizeOf(live);
          if (size !== null && size < offset) {
            // Rotated (copied, then truncated): the live file starts again.
            offset = 0;
            partial = '';
          }
          if (size !== null && size > offset) {
            const end = Math.min(size, offset + FOLLOW_READ_BYTES);
            const text = await readRange(live, offset, end);
            offset = end;
            const parts = (partial + (text ?? '')).split('\n');
            partial = parts.pop() ?? '';
            if (partial.length > LINE_MAX_CHARS) {
              parts.push(partial);
              partial = '';
            }
            if (!closed) for (const line of parts) send(line);
          }
        } catch {
          // The file is being rotated or removed: the next look finds out.
        }
        if (!closed) timer = setTimeout(look, FOLLOW_POLL_MS);
      };
      timer = setTimeout(look, FOLLOW_POLL_MS);
      beat = setInterval(() => {
        if (!closed) controller.enqueue(commentFrame('heartbeat'));
      }, HEARTBEAT_MS);
      signal.addEventListener('abort', () => {
        stop();
        try {
          controller.close();
        } catch {
          // Already closed or errored.
        }
      });
    },
    cancel: stop,
  });
}

/** Registers the engine-log route. */
export function register(router: InternalRouter): void {
  router.get(internalPaths.projectLogs(ROUTE_PARAMS.id), async (request, ctx) => {
    const projectId = pathParam((request as Routed).params.id, 'id', projectIdSchema);
    const query = parseOr400(logsQuerySchema, Object.fromEntries(new URL(request.url).searchParams), 'query');
    const live = ctx.tenants.logs.path(projectId);
    const { lines, size } = await lastLines(live, query.tail ?? LOGS_TAIL_DEFAULT);
    if (!query.follow) return json({ project: projectId, lines } satisfies LogsAnswer);
    return new Response(follow(live, lines, size, request.signal), { status: 200, headers: { ...SSE_HEADERS } });
  });
}
