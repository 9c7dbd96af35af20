/**
 * Realtime subscribe as an async iterator of delivered events (docs/realtime.md "Subscribe";
 * docs/sdk.md "Realtime"): one Server-Sent Events stream, reconnected with backoff when it ends or
 * goes quiet for longer than three heartbeats; `overflow` and refusals (a revoked key's 401 on
 * reconnecting, say) end the iteration with an error.
 */
import { RealtimeOverflowError, SvcError } from './errors.ts';
import { backoffMs, isNetworkError, sleep, type Answer, type CallOptions, type Transport } from './http.ts';
import * as R from './routes.gen.ts';
import { sseFrames } from './sse.ts';
import type { RealtimeEvent } from './types.ts';

/** Options of `subscribe`. */
export interface SubscribeOptions extends Omit<CallOptions, 'timeoutMs'> {
  /** Called each time the service has registered the subscription: events published after it reach you. */
  onOpen?: () => void;
  /** Called before each reconnection, with why and how long it waits. */
  onReconnect?: (info: { attempt: number; delayMs: number; error: unknown }) => void;
  /** A stream silent (not even a heartbeat) for this long is taken as dead and reopened (default 45000). */
  idleTimeoutMs?: number;
  /** Longest wait between two attempts (default 10000). */
  maxBackoffMs?: number;
  /**
   * Opens each connection with a single-use ticket in the URL instead of the `Authorization` header
   * (docs/realtime.md "Browsers: tickets"); default: in browsers, where `EventSource`-style requests
   * without custom headers need no CORS preflight.
   */
  tickets?: boolean;
}

const DEFAULT_IDLE_MS = 45_000;
const DEFAULT_MAX_BACKOFF_MS = 10_000;
/** Statuses worth another attempt: capacity and an unreachable host agent (docs/realtime.md "Limits"). */
const RETRY_STATUSES = new Set([429, 502, 503, 504]);

/** Subscribes to `channels` of `projectId` with the client's project key or session. */
export function subscribe(transport: Transport, projectId: string, channels: readonly string[], options: SubscribeOptions = {}): AsyncIterable<RealtimeEvent> {
  return {
    [Symbol.asyncIterator]: () => events(transport, projectId, channels, options),
  };
}

async function* events(transport: Transport, projectId: string, channels: readonly string[], options: SubscribeOptions): AsyncGenerator<RealtimeEvent> {
  const { signal } = options;
  const idleMs = options.idleTimeoutMs ?? DEFAULT_IDLE_MS;
  const maxBackoff = options.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS;
  const tickets = options.tickets ?? typeof (globalThis as { document?: unknown }).document !== 'undefined';
  let attempt = 0;
  for (;;) {
    signal?.throwIfAborted();
    // One controller per connection: the idle watchdog and leaving the loop abort it.
    const connection = new AbortController();
    const onAbort = () => connection.abort(signal!.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    let failure: unknown = new Error('the stream ended');
    // The watchdog covers the whole connection: a subscription whose answer never comes is reopened
    // like a stream that went silent.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      clearTimeout(timer);
      if (idleMs > 0) timer = setTimeout(() => connection.abort(new DOMException(`no event or heartbeat for ${idleMs} ms`, 'TimeoutError')), idleMs);
    };
    arm();
    try {
      const answer = await openStream(transport, projectId, channels, tickets, connection.signal);
      try {
        const body = answer.response.body;
        if (!body) throw new Error('the subscription answered no stream');
        arm();
        try {
          for await (const frame of sseFrames(body)) {
            arm();
            if (frame.comment !== undefined) {
              if (frame.comment === 'subscribed') {
                attempt = 0;
                options.onOpen?.();
              }
              continue;
            }
            if (frame.event === 'overflow') throw new RealtimeOverflowError(parseObject(frame.data));
            if (frame.data === undefined) continue;
            yield JSON.parse(frame.data) as RealtimeEvent;
          }
        } finally {
          clearTimeout(timer);
        }
      } finally {
        answer.done();
      }
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (err instanceof RealtimeOverflowError) throw err;
      if (err instanceof SvcError && !RETRY_STATUSES.has(err.status)) throw err;
      if (!(err instanceof SvcError) && !isNetworkError(err) && !isAbortLike(err)) throw err;
      failure = err;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      connection.abort();
    }
    // The stream ended or failed: the agent restarted, a proxy cut it, the network dropped.
    const delayMs = Math.min(maxBackoff, failure instanceof SvcError && failure.retryAfter !== null ? failure.retryAfter * 1000 : backoffMs(attempt, maxBackoff));
    attempt++;
    options.onReconnect?.({ attempt, delayMs, error: failure });
    await sleep(delayMs, signal);
  }
}

/**
 * Opens one subscription stream: with a fresh ticket in the URL when `tickets` (a ticket opens one
 * connection only), else with the client's key or session.
 */
async function openStream(transport: Transport, projectId: string, channels: readonly string[], tickets: boolean, signal: AbortSignal): Promise<Answer> {
  const params = { id: projectId };
  const ticket = tickets ? (await transport.call(R.realtime.ticket, { params, json: { channels: [...channels] } }, { signal })).ticket : null;
  return transport.open(
    R.realtime.subscribe,
    {
      params,
      query: ticket ? { channel: [...channels], ticket } : { channel: [...channels] },
      headers: { accept: 'text/event-stream' },
      ...(ticket ? { access: 'none' as const } : {}),
      streaming: true,
    },
    { signal },
  );
}

function isAbortLike(err: unknown): boolean {
  return err instanceof DOMException && (err.name === 'AbortError' || err.name === 'TimeoutError');
}

function parseObject(data: string | undefined): Record<string, unknown> {
  try {
    const v = JSON.parse(data ?? '{}') as unknown;
    return v && typeof v === 'object' ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
