/**
 * Server-Sent Events framing (WHATWG HTML §9.2 "Server-sent events"): `id:`, `event:`, `data:` lines
 * ended by a blank line; comments start with `:`. A field value never contains a raw CR or LF, since
 * either would end the line early and let a value forge further fields (docs/realtime.md "The stream").
 *
 * Frames can be built already wrapped in one HTTP/1.1 chunk (RFC 9112 §7.1): the hub writes them
 * straight to the socket of a chunked response, and since the chunk header depends only on the
 * frame, one Buffer serves every subscriber.
 */

const LINE_BREAK = /[\r\n]/;

/** How frames are put on the wire: raw SSE bytes, or each frame as one HTTP/1.1 chunk. */
export type Framing = 'raw' | 'http-chunked';

function field(name: string, value: string): string {
  if (LINE_BREAK.test(value)) throw new Error(`SSE ${name} must not contain CR or LF`);
  return `${name}: ${value}\n`;
}

function wrap(text: string, framing: Framing): Buffer {
  if (framing === 'raw') return Buffer.from(text, 'utf8');
  const body = Buffer.from(text, 'utf8');
  const head = `${body.byteLength.toString(16)}\r\n`;
  const out = Buffer.allocUnsafe(head.length + body.byteLength + 2);
  out.write(head, 0, 'latin1');
  body.copy(out, head.length);
  out.write('\r\n', head.length + body.byteLength, 'latin1');
  return out;
}

/** One event frame as bytes: built once and shared by every subscriber it goes to. */
export function eventFrame(id: number | null, event: string, data: string, framing: Framing = 'raw'): Buffer {
  return wrap(`${id === null ? '' : field('id', String(id))}${field('event', event)}${field('data', data)}\n`, framing);
}

/** A comment frame (heartbeats, the opening line): ignored by EventSource, keeps proxies from timing out. */
export function commentFrame(text: string, framing: Framing = 'raw'): Buffer {
  if (LINE_BREAK.test(text)) throw new Error('SSE comment must not contain CR or LF');
  return wrap(`: ${text}\n\n`, framing);
}
