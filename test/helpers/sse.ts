/**
 * A small Server-Sent Events reader for the realtime suites: frames (WHATWG HTML §9.2.6) from a fetch
 * Response body as they arrive, comments included, so tests can see heartbeats too. The parsing is
 * the SDK's own (client/sse.ts); this adds timeouts and the reads tests need.
 */
import { SseParser, type SseFrame } from '../../client/sse.ts';

export type { SseFrame } from '../../client/sse.ts';

/** Reads frames from an event-stream response. */
export class SseReader {
  readonly response: Response;
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private readonly decoder = new TextDecoder();
  private readonly parser = new SseParser();
  private frames: SseFrame[] = [];
  private ended = false;
  private pending: Promise<ReadableStreamReadResult<Uint8Array>> | undefined;

  constructor(response: Response) {
    if (!response.body) throw new Error(`no body (status ${response.status})`);
    this.response = response;
    this.reader = response.body.getReader();
  }

  /** The next frame, or null when the stream ended; rejects after `timeoutMs`. */
  async next(timeoutMs = 5000): Promise<SseFrame | null> {
    const deadline = Date.now() + timeoutMs;
    while (this.frames.length === 0) {
      if (this.ended) return null;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('timed out waiting for an SSE frame');
      // A read that loses the race stays pending and is reused: dropping it would lose its chunk.
      this.pending ??= this.reader.read();
      let timer: NodeJS.Timeout | undefined;
      const chunk = await Promise.race([
        this.pending,
        new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), left))),
      ]).finally(() => clearTimeout(timer));
      if (chunk === 'timeout') throw new Error('timed out waiting for an SSE frame');
      this.pending = undefined;
      if (chunk.done) {
        this.ended = true;
        continue;
      }
      this.frames.push(...this.parser.push(this.decoder.decode(chunk.value, { stream: true })));
    }
    return this.frames.shift()!;
  }

  /** The next event frame, skipping comments (heartbeats, the opening comment). */
  async nextEvent(timeoutMs = 5000): Promise<SseFrame | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const f = await this.next(Math.max(1, deadline - Date.now()));
      if (f === null || f.comment === undefined) return f;
    }
  }

  /** Asserts nothing but comments arrive within `ms` (answers the first event if one does). */
  async quiet(ms: number): Promise<SseFrame | null> {
    try {
      return await this.nextEvent(ms);
    } catch {
      return null;
    }
  }

  /** Cancels the body (closes the connection). */
  async close(): Promise<void> {
    await this.reader.cancel().catch(() => {});
  }
}
