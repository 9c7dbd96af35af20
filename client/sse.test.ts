/** The SDK's Server-Sent Events parser (client/sse.ts; WHATWG HTML §9.2.6) on any split of a stream. */
import { describe, expect, it } from 'vitest';
import { SseParser, sseFrames } from './sse.ts';

const STREAM = ': subscribed\n\nid: 42\nevent: message:new\ndata: {"a":1}\n\n: heartbeat\n\nevent: overflow\ndata: {"queue":1024}\n\n';

describe('SseParser', () => {
  it('parses frames and comments the same whatever the chunking', () => {
    const whole = new SseParser().push(STREAM);
    expect(whole).toEqual([
      { comment: 'subscribed' },
      { id: '42', event: 'message:new', data: '{"a":1}' },
      { comment: 'heartbeat' },
      { event: 'overflow', data: '{"queue":1024}' },
    ]);
    for (let size = 1; size < 12; size++) {
      const parser = new SseParser();
      const frames = [];
      for (let i = 0; i < STREAM.length; i += size) frames.push(...parser.push(STREAM.slice(i, i + size)));
      expect(frames, `chunks of ${size}`).toEqual(whole);
    }
  });

  it('takes CRLF and CR line ends, joins data lines, skips a BOM', () => {
    const p = new SseParser();
    expect([...p.push('\uFEFFdata: a\r\ndata: b\r'), ...p.push('\n\r\ndata:c\r\r')]).toEqual([{ data: 'a\nb' }]);
    // A CR at the end of a chunk may be half a CRLF: the frame is dispatched once the next byte says.
    expect(p.push(':')).toEqual([{ data: 'c' }]);
  });

  it('reads frames from a byte stream split inside a character', async () => {
    const bytes = new TextEncoder().encode('data: é\n\n');
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(bytes.subarray(0, 7));
        c.enqueue(bytes.subarray(7));
        c.close();
      },
    });
    const frames = [];
    for await (const f of sseFrames(body)) frames.push(f);
    expect(frames).toEqual([{ data: 'é' }]);
  });
});
