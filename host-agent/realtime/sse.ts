/**
 * Server-Sent Events framing (WHATWG HTML §9.2 "Server-sent events"): `id:`, `event:`, `data:` lines
 * ended by a blank line; comments start with `:`. A field value never contains a raw CR or LF, since
 * either would end the line early and let a value forge further fields (STYLE "Processes and streams").
 */

const LINE_BREAK = /[\r\n]/;

function field(name: string, value: string): string {
  if (LINE_BREAK.test(value)) throw new Error(`SSE ${name} must not contain CR or LF`);
  return `${name}: ${value}\n`;
}

/** One event frame as bytes: built once and shared by every subscriber it goes to. */
export function eventFrame(id: number | null, event: string, data: string): Buffer {
  return Buffer.from(`${id === null ? '' : field('id', String(id))}${field('event', event)}${field('data', data)}\n`, 'utf8');
}

/** A comment frame (heartbeats, the opening line): ignored by EventSource, keeps proxies from timing out. */
export function commentFrame(text: string): Buffer {
  if (LINE_BREAK.test(text)) throw new Error('SSE comment must not contain CR or LF');
  return Buffer.from(`: ${text}\n\n`, 'utf8');
}
