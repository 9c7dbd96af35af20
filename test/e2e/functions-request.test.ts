/**
 * A function sees exactly the client's request, and the client exactly the function's answer
 * (docs/functions.md "Invoke"), through both entries that serve invocations: the local stack (the
 * front, the handlers bundle in miniflare/workerd) and the Node entry (dist/node-server.mjs, the
 * production shape), both in front of the same host agent. Requests are written as raw bytes, so
 * that no client library adds a header of its own; the function answers what it saw in a header
 * (a HEAD's answer has no body).
 *
 * The function sees: the client's method (any of them with or without a body), the path and query,
 * the body, and its headers less `Authorization`, `Host`, the hop-by-hop ones (with those its
 * `Connection` lists) and the service's internal `x-svc-fn-*` names — its own `X-Request-Id` and
 * `Accept-Encoding` included, nothing a hop added.
 *
 * Until the function runtime takes the agent's whole InvocationInput (method, headers, hasBody,
 * length), what it builds the function's request from decides the GET and HEAD bodies, the presence
 * of a body and `Content-Length` (docs/functions.md "Invoke").
 */
import type { ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { tempDir } from '../helpers/env.ts';
import { FunctionsClient, httpSend } from '../helpers/functions.ts';
import { startNodeEntry, startSuiteStack } from '../helpers/stack.ts';

/** The public origin functions see (SVCD_CLOUD_ORIGIN). */
const ORIGIN = 'https://api.example.test';
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/**
 * Answers what it received in `x-seen` (base64 of JSON): method, URL, headers as iterated, whether
 * the request had a body, the body. `/gzip` answers gzip-encoded text; `/answer` an answer with
 * headers of every kind.
 */
const SEER = `
const b64 = (text) => { let s = ''; for (const byte of new TextEncoder().encode(text)) s += String.fromCharCode(byte); return btoa(s); };
export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === '/gzip') {
      const zipped = new Blob(['zipped text']).stream().pipeThrough(new CompressionStream('gzip'));
      return new Response(zipped, { headers: { 'content-encoding': 'gzip', 'content-type': 'text/plain' } });
    }
    if (url.pathname === '/answer') {
      const headers = new Headers([['x-fn-a', '1'], ['cache-control', 'no-cache'], ['etag', '"v1"'], ['x-request-id', 'fn-own'], ['content-type', 'text/plain'], ['link', '</next>; rel="next"']]);
      headers.append('set-cookie', 'a=1; Path=/');
      headers.append('set-cookie', 'b=2; Path=/');
      return new Response('answered', { status: 203, statusText: 'Seen By Function', headers });
    }
    const hasBody = request.body !== null;
    const body = new TextDecoder().decode(await request.arrayBuffer());
    const seen = JSON.stringify({ method: request.method, url: request.url, headers: [...request.headers], hasBody, body });
    return new Response(seen, { headers: { 'content-type': 'application/json', 'x-seen': b64(seen) } });
  },
};`;

let stack: Stack;
let dir: ReturnType<typeof tempDir>;
let nodeEntry: { child: ChildProcess; url: string } | undefined;
let key: string;
let project: string;

beforeAll(async () => {
  dir = tempDir('svc-e2e-fn-request-');
  stack = await startSuiteStack(dir.dir, { SVCD_CLOUD_ORIGIN: ORIGIN });
  nodeEntry = await startNodeEntry(stack, { SVCD_LOG_LEVEL: 'warn' });
  const signedUp = await fetch(`${stack.url}/v0/signup`, { method: 'POST', body: '{}' });
  const { token } = (await signedUp.json()) as { token: string };
  const auth = { authorization: `Bearer ${token}` };
  project = ((await (await fetch(`${stack.url}/v0/projects`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'seen' }) })).json()) as { id: string }).id;
  key = ((await (await fetch(`${stack.url}/v0/projects/${project}/keys`, { method: 'POST', headers: auth, body: '{}' })).json()) as { key: string }).key;
  await new FunctionsClient(httpSend(stack.url)).deployed(token, project, 'seer', SEER);
}, 120_000);

afterAll(async () => {
  nodeEntry?.child.kill('SIGTERM');
  await stack?.stop();
  dir?.cleanup();
});

/** An answer read off the wire. */
interface Wire {
  status: number;
  reason: string;
  headers: [string, string][];
  body: Buffer;
}

/** Writes `request` on a connection of its own to `base` and reads the whole answer (the request says `Connection: close`). */
function exchange(base: string, request: string): Promise<Wire> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('end', () => {
      const all = Buffer.concat(chunks);
      const end = all.indexOf('\r\n\r\n');
      const [statusLine, ...lines] = all.subarray(0, end).toString('latin1').split('\r\n');
      const m = /^HTTP\/1\.1 (\d{3}) ?(.*)$/.exec(statusLine!);
      if (!m) return reject(new Error(`not an answer: ${all.toString('latin1').slice(0, 200)}`));
      const headers = lines.map((l) => {
        const i = l.indexOf(':');
        return [l.slice(0, i).toLowerCase(), l.slice(i + 1).trim()] as [string, string];
      });
      let body: Buffer = all.subarray(end + 4);
      if (headers.some(([n, v]) => n === 'transfer-encoding' && /chunked/i.test(v))) body = dechunk(body);
      resolve({ status: Number(m[1]), reason: m[2]!, headers, body });
    });
  });
}

function dechunk(raw: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = raw.indexOf('\r\n', at);
    const size = parseInt(raw.subarray(at, eol).toString('latin1'), 16);
    if (!size) return Buffer.concat(out);
    out.push(raw.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

/** One request of the matrix: its method, body framing and `Accept-Encoding`. */
interface Case {
  method: string;
  /** `length`: `hello` with its Content-Length; `zero`: Content-Length 0; `chunked`: `hello` chunked; `none`: no body, no framing. */
  body: 'length' | 'zero' | 'chunked' | 'none';
  acceptEncoding: string | null;
}

/** What the function should see, from the header lines the client sent. */
interface Seen {
  method: string;
  url: string;
  headers: [string, string][];
  hasBody: boolean;
  body: string;
}

/** The request's bytes and what the function must see of it. */
function requestOf(base: string, c: Case): { bytes: string; expected: Seen } {
  const lines: [string, string][] = [
    ['Host', new URL(base).host],
    ['Authorization', `Bearer ${key}`],
    ['User-Agent', 'raw-client/1'],
    ['X-Request-Id', 'client-chosen-id'],
    ['X-Dup', 'one'],
    ['X-Dup', 'two'],
    ['X-Hop', 'listed by Connection'],
    ['Connection', 'close, X-Hop'],
    ['Content-Type', 'text/plain'],
    // The service's internal names, which could spoof its signals: never seen, never obeyed.
    ['X-Svc-Fn-Method', 'DELETE'],
    ['X-Svc-Fn-Body', '1'],
    ['X-Svc-Fn-H-X-Injected', 'by the client'],
  ];
  if (c.acceptEncoding !== null) lines.push(['Accept-Encoding', c.acceptEncoding]);
  let payload = '';
  if (c.body === 'length') {
    lines.push(['Content-Length', '5']);
    payload = 'hello';
  } else if (c.body === 'zero') lines.push(['Content-Length', '0']);
  else if (c.body === 'chunked') {
    lines.push(['Transfer-Encoding', 'chunked']);
    payload = '3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n';
  }
  const path = `/v0/projects/${project}/functions/seer/invoke/a/b%20c/?d=e&f=%2F`;
  const bytes = `${c.method} ${path} HTTP/1.1\r\n${lines.map(([n, v]) => `${n}: ${v}`).join('\r\n')}\r\n\r\n${payload}`;
  // Less the credential, Host and the hop-by-hop ones (Connection, Transfer-Encoding, what Connection lists).
  const unseen = new Set(['authorization', 'host', 'connection', 'transfer-encoding', 'x-hop']);
  const seen = new Map<string, string>();
  for (const [n, v] of lines) {
    const name = n.toLowerCase();
    if (unseen.has(name) || name.startsWith('x-svc-fn-')) continue;
    seen.set(name, seen.has(name) ? `${seen.get(name)}, ${v}` : v);
  }
  const sent = c.body === 'length' || c.body === 'chunked';
  return {
    bytes,
    expected: {
      method: c.method,
      url: `${ORIGIN}/a/b%20c/?d=e&f=%2F`,
      headers: [...seen].sort(([a], [b]) => (a < b ? -1 : 1)),
      hasBody: sent,
      body: sent ? 'hello' : '',
    },
  };
}

/** What the function saw, from its `x-seen` answer header; or the answer's status and body when it did not answer. */
function seenOf(w: Wire): Seen | string {
  const header = w.headers.find(([n]) => n === 'x-seen');
  if (w.status !== 200 || !header) return `answered ${w.status} ${w.body.toString('utf8').slice(0, 200)}`;
  return JSON.parse(Buffer.from(header[1], 'base64').toString('utf8')) as Seen;
}

/** How what the function saw differs from what it should have, one line per difference (none: exact). */
function differences(expected: Seen, seen: Seen | string): string[] {
  if (typeof seen === 'string') return [seen];
  const out: string[] = [];
  for (const field of ['method', 'url', 'hasBody', 'body'] as const) {
    if (seen[field] !== expected[field]) out.push(`${field} ${JSON.stringify(seen[field])}, not ${JSON.stringify(expected[field])}`);
  }
  const want = new Map(expected.headers);
  const got = new Map(seen.headers);
  for (const [name, value] of want) {
    if (!got.has(name)) out.push(`no ${name}: ${value}`);
    else if (got.get(name) !== value) out.push(`${name}: ${got.get(name)}, not ${value}`);
  }
  for (const [name, value] of got) if (!want.has(name)) out.push(`added ${name}: ${value}`);
  return out;
}

const ENTRIES = [
  ['the local stack (front, miniflare)', () => stack.url],
  ['the Node entry', () => nodeEntry!.url],
] as const;

/**
 * The one difference the local stack is documented to make (docs/functions.md "Invoke"): workerd,
 * which runs the handlers there, keeps no difference between `Content-Length: 0` and none (a GET's
 * is dropped, a bodiless POST, PUT or PATCH gets one).
 */
function workerdNormalizes(body: Case['body'], difference: string): boolean {
  return (body === 'none' && difference === 'added content-length: 0') || (body === 'zero' && difference === 'no content-length: 0');
}

describe.each(ENTRIES)('through %s', (entry, base) => {
  it.each(METHODS)('%s: the function sees what the client sent, with and without a body and Accept-Encoding', async (method) => {
    const bodies: Case['body'][] = method === 'GET' || method === 'POST' ? ['length', 'none', 'zero', 'chunked'] : ['length', 'none'];
    const problems: string[] = [];
    for (const body of bodies) {
      for (const acceptEncoding of [null, 'gzip, deflate', 'identity']) {
        const { bytes, expected } = requestOf(base(), { method, body, acceptEncoding });
        const seen = seenOf(await exchange(base(), bytes));
        for (const d of differences(expected, seen)) {
          if (entry === ENTRIES[0][0] && workerdNormalizes(body, d)) continue;
          problems.push(`body=${body} accept-encoding=${acceptEncoding}: ${d}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  /** The function's `/answer`, read off the wire. */
  const answered = () =>
    exchange(base(), `GET /v0/projects/${project}/functions/seer/invoke/answer HTTP/1.1\r\nHost: ${new URL(base()).host}\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`);

  it("relays the function's answer as it gave it: status, headers, Set-Cookie apart; the service's X-Request-Id", async () => {
    const w = await answered();
    expect(w.status).toBe(203);
    expect(w.body.toString()).toBe('answered');
    const fromFunction = w.headers.filter(([n]) => !['x-request-id', 'date', 'content-length', 'connection', 'keep-alive', 'transfer-encoding'].includes(n));
    expect(fromFunction.sort()).toEqual(
      [
        ['cache-control', 'no-cache'],
        ['content-type', 'text/plain'],
        ['etag', '"v1"'],
        ['link', '</next>; rel="next"'],
        ['set-cookie', 'a=1; Path=/'],
        ['set-cookie', 'b=2; Path=/'],
        ['x-fn-a', '1'],
      ].sort(),
    );
    const ids = w.headers.filter(([n]) => n === 'x-request-id').map(([, v]) => v);
    expect(ids).toHaveLength(1);
    expect(ids[0]).toMatch(/^req_[0-9a-f]{16}$/);
  });

  it("relays the function's status text", async () => {
    expect((await answered()).reason).toBe('Seen By Function');
  });

  it("passes the function's Content-Encoding and its bytes on undecoded, whatever the client accepts", async () => {
    const host = new URL(base()).host;
    for (const acceptEncoding of [null, 'gzip', 'gzip, deflate, br']) {
      const w = await exchange(
        base(),
        `GET /v0/projects/${project}/functions/seer/invoke/gzip HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\n${acceptEncoding === null ? '' : `Accept-Encoding: ${acceptEncoding}\r\n`}Connection: close\r\n\r\n`,
      );
      expect(w.status, String(acceptEncoding)).toBe(200);
      expect(w.headers.filter(([n]) => n === 'content-encoding' || n.startsWith('x-svc-')), String(acceptEncoding)).toEqual([['content-encoding', 'gzip']]);
      expect(gunzipSync(w.body).toString(), String(acceptEncoding)).toBe('zipped text');
    }
  });
});
