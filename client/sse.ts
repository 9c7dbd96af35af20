/**
 * A Server-Sent Events parser over a web stream (WHATWG HTML §9.2.6 "Interpreting an event
 * stream"): lines end in CRLF, LF or CR; a blank line dispatches a frame; comments (`:` lines) are
 * reported too, so a reader can tell a live quiet stream (heartbeats, docs/realtime.md) from a dead one.
 */

/** One dispatched frame, or one comment line. */
export interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

/** Incremental parser: feed it text, take the frames it completed. */
export class SseParser {
  #buffer = '';
  #frame: SseFrame = {};
  #started = false;

  /** Parses `text` (any split of the stream), answering the frames and comments it completed. */
  push(text: string): SseFrame[] {
    if (!this.#started && text.length > 0) {
      this.#started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    this.#buffer += text;
    const out: SseFrame[] = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.#buffer);
      if (!m) break;
      // A CR at the very end may be the first half of a CRLF: wait for the next chunk.
      if (m[0] === '\r' && m.index === this.#buffer.length - 1) break;
      const line = this.#buffer.slice(0, m.index);
      this.#buffer = this.#buffer.slice(m.index + m[0].length);
      this.#line(line, out);
    }
    return out;
  }

  #line(line: string, out: SseFrame[]): void {
    if (line === '') {
      const f = this.#frame;
      if (f.id !== undefined || f.event !== undefined || f.data !== undefined) out.push(f);
      this.#frame = {};
      return;
    }
    if (line.startsWith(':')) {
      out.push({ comment: line.slice(1).trimStart() });
      return;
    }
    const colon = line.indexOf(':');
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (name === 'data') this.#frame.data = this.#frame.data === undefined ? value : `${this.#frame.data}\n${value}`;
    else if (name === 'event') this.#frame.event = value;
    else if (name === 'id' && !value.includes('\0')) this.#frame.id = value;
  }
}

/** The frames of an event stream, as they arrive. */
export async function* sseFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield* parser.push(decoder.decode(value, { stream: true }));
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
