/**
 * A small Server-Sent Events reader for the realtime suites: parses frames (WHATWG HTML §9.2.6) from a
 * fetch Response body as they arrive, comments included, so tests can see heartbeats too.
 */

/** One dispatched frame: an event (`id`/`event`/`data`) or a comment line. */
export interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

/** Reads frames from an event-stream response. */
export class SseReader {
  readonly response: Response;
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private readonly decoder = new TextDecoder();
  private buffer = '';
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
      this.buffer += this.decoder.decode(chunk.value, { stream: true });
      this.parse();
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

  private parse(): void {
    for (;;) {
      const end = this.buffer.indexOf('\n\n');
      if (end < 0) return;
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const frame: SseFrame = {};
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) {
          this.frames.push({ comment: line.slice(1).trim() });
          continue;
        }
        const colon = line.indexOf(':');
        const name = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (name === 'id' || name === 'event') frame[name] = value;
        else if (name === 'data') frame.data = frame.data === undefined ? value : `${frame.data}\n${value}`;
      }
      if (frame.id !== undefined || frame.event !== undefined || frame.data !== undefined) this.frames.push(frame);
    }
  }
}
