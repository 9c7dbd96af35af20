/**
 * The base URL under refusals, load and odd requests (docs/dataplane.md "Refused bodies", "One base
 * URL (local stack)"): a real stack (DynamoDB Local, a host agent and its engine, the handlers bundle
 * in miniflare, the front), driven over raw sockets and undici only. Needs dist/worker.js and
 * dist/node-server.mjs (`npm test` builds them first).
 *
 * - an answer given before the body was read arrives at once, says `Connection: close`, and the
 *   connection ends promptly, whether the client stalls or sends its whole body first;
 * - its status is the handlers' or the agent's (413, 401, 404), never 503;
 * - a body shorter than its `Content-Length` is a 400 envelope;
 * - one client's refused requests do not break another client's requests;
 * - 1,000 open event streams leave every other route answering;
 * - absolute-form request targets are served on every listener;
 * - the front logs one line per request, without query or credentials.
 */
import type { ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startStack, type Stack } from '../../infra/local/stack.ts';
import { issueInternalToken } from '../../shared/auth.ts';
import { tempDir, uniqueTable } from '../helpers/env.ts';
import { startNodeEntry } from '../helpers/stack.ts';
import { callJson } from '../helpers/http.ts';

const MiB = 1024 * 1024;
const dir = tempDir('svc-front-');
const logged: string[] = [];
let stack: Stack;
let port: number;
let token: string;
let projects: string[];
let key: string;
let nodeEntry: { child: ChildProcess; url: string } | undefined;

const call = (method: string, path: string, auth?: string, body?: unknown) => callJson(stack.url, method, path, auth, body);

beforeAll(async () => {
  stack = await startStack({
    dir: dir.dir,
    dynamoEndpoint: inject('dynamoEndpoint'),
    env: { SVCD_TABLE: uniqueTable(), SVCD_PORT: '0', SVCD_AGENT_PORT: '0', SVCD_DATAPLANE_PORT: '0', SVCD_LOG_LEVEL: 'debug' },
    agentOutput: 'collect',
    log: (line) => logged.push(line),
  });
  port = Number(new URL(stack.url).port);
  token = (await call('POST', '/v0/signup', undefined, {})).token;
  projects = [(await call('POST', '/v0/projects', token, { name: 'front-a' })).id, (await call('POST', '/v0/projects', token, { name: 'front-b' })).id];
  await call('POST', `/v0/projects/${projects[0]}/wakeup`, token);
  key = (await call('POST', `/v0/projects/${projects[0]}/keys`, token, {})).key;
  await call('PUT', `/v0/projects/${projects[0]}/storage/buckets/front`, token);
}, 120_000);
afterAll(async () => {
  nodeEntry?.child.kill('SIGTERM');
  await stack?.stop();
  dir.cleanup();
});

/** What a raw client saw. */
interface Seen {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Milliseconds from the first byte of the answer to the end of the connection, or null if it did not end. */
  endedAfterMs: number | null;
  error: string | null;
}

/**
 * Sends `head`, then `send` bytes of body (the whole of it first when `wholeFirst`: nothing is read
 * until every byte is written), then stalls or shuts its side (`shut`); collects what comes back
 * for at most `waitMs`.
 */
function rawRequest(head: string, { send = 0, wholeFirst = false, shut = false, waitMs = 8_000, to = port } = {}): Promise<Seen> {
  return new Promise((resolve) => {
    const socket = connect(to, '127.0.0.1');
    const chunks: Buffer[] = [];
    let firstAt = 0;
    let error: string | null = null;
    let done = false;
    const finish = (ended: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const [top = '', ...rest] = text.split('\r\n\r\n');
      const lines = top.split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of lines.slice(1)) {
        const i = l.indexOf(':');
        if (i > 0) headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
      }
      let body = rest.join('\r\n\r\n');
      if (headers['transfer-encoding'] === 'chunked') body = dechunk(body);
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(lines[0] ?? '')?.[1] ?? 0),
        headers,
        body,
        endedAfterMs: ended && firstAt ? Date.now() - firstAt : null,
        error,
      });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    if (wholeFirst) socket.pause();
    socket.on('data', (d: Buffer) => {
      firstAt ||= Date.now();
      chunks.push(d);
      // An answer complete on a connection kept open: nothing more will come.
      const text = Buffer.concat(chunks).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end));
      if (end > 0 && length && !/\r\nconnection: *close/i.test(text.slice(0, end)) && text.length - end - 4 >= Number(length[1])) finish(false);
    });
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('error', (err) => (error = (err as NodeJS.ErrnoException).code ?? err.message));
    socket.write(head);
    void (async () => {
      const piece = Buffer.alloc(64 * 1024, 0x20);
      for (let left = send; left > 0 && !socket.destroyed; left -= piece.byteLength) {
        if (!socket.write(piece.subarray(0, Math.min(left, piece.byteLength)))) {
          await new Promise<void>((r) => {
            const go = () => {
              socket.off('drain', go).off('close', go);
              r();
            };
            socket.on('drain', go).on('close', go);
          });
        }
      }
      if (wholeFirst) socket.resume();
      if (shut && !socket.destroyed) socket.end();
    })();
  });
}

/** The payload of a chunked body (RFC 9112 §7.1). */
function dechunk(text: string): string {
  let out = '';
  for (let at = 0; ; ) {
    const eol = text.indexOf('\r\n', at);
    const size = eol < 0 ? 0 : parseInt(text.slice(at, eol), 16);
    if (!size) return out;
    out += text.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
}

function post(path: string, length: number, auth?: string, method = 'POST'): string {
  return `${method} ${path} HTTP/1.1\r\nhost: front.test\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n${auth ? `authorization: Bearer ${auth}\r\n` : ''}\r\n`;
}

/** An error envelope with its request id, on a connection closed after it unless `reusable`. */
function expectRefusal(seen: Seen, status: number, code: string, { reusable = false } = {}): void {
  expect(seen.status, JSON.stringify(seen)).toBe(status);
  expect(JSON.parse(seen.body).error.code).toBe(code);
  expect(seen.headers['x-request-id']).toMatch(/^req_[0-9a-f]{16}$/);
  if (!reusable) expect(seen.headers.connection?.toLowerCase()).toBe('close');
}

describe('a refused request never hangs nor poisons the connection', () => {
  const cases = () => [
    { what: 'a 33 MiB object PUT', head: post(`/v0/projects/${projects[0]}/storage/objects/front/big`, 33 * MiB, token, 'PUT'), status: 413, code: 'payload_too_large' },
    { what: '20 MiB to /v2/sql', head: post('/v2/sql', 20 * MiB, key), status: 413, code: 'payload_too_large' },
    { what: '20 MiB to POST /v0/projects', head: post('/v0/projects', 20 * MiB, token), status: 413, code: 'payload_too_large' },
    { what: '20 MiB to an unknown route', head: post('/v0/nowhere', 20 * MiB), status: 404, code: 'not_found' },
    { what: '20 MiB to /v2 without a key', head: post('/v2/sql', 20 * MiB), status: 401, code: 'authentication_required' },
  ];

  it('answers at once and ends the connection promptly when the client stalls mid-body', async () => {
    for (const c of cases()) {
      const seen = await rawRequest(c.head, { send: 256 * 1024 });
      expectRefusal(seen, c.status, c.code);
      expect(seen.endedAfterMs, `${c.what}: the connection did not end`).not.toBeNull();
      expect(seen.endedAfterMs!, c.what).toBeLessThan(2_000);
    }
  }, 60_000);

  it('answers a client that sends its whole body before reading', async () => {
    for (const c of cases()) {
      const length = Number(/content-length: (\d+)/.exec(c.head)![1]);
      const seen = await rawRequest(c.head, { send: length, wholeFirst: true, waitMs: 15_000 });
      expect(seen.error, c.what).toBeNull();
      expectRefusal(seen, c.status, c.code);
    }
  }, 60_000);

  it('answers a route that takes no body (wakeup) and closes the connection after it', async () => {
    const seen = await rawRequest(post(`/v0/projects/${projects[0]}/wakeup`, 20 * MiB, token), { send: 256 * 1024 });
    expect(seen.status).toBeGreaterThanOrEqual(200);
    expect(seen.status).toBeLessThan(500);
    expect(seen.headers['x-request-id']).toMatch(/^req_/);
    expect(seen.headers.connection?.toLowerCase()).toBe('close');
    expect(seen.endedAfterMs).not.toBeNull();
    expect(seen.endedAfterMs!).toBeLessThan(2_000);
  });
});

describe('the status is the one the handlers or the agent give, never 503', () => {
  async function send(path: string, body: Uint8Array, auth: string | undefined, method = 'POST') {
    const r = await request(`${stack.url}${path}`, {
      method: method as 'POST',
      headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
      body,
      signal: AbortSignal.timeout(15_000),
    });
    const text = await r.body.text();
    return { status: r.statusCode, code: JSON.parse(text).error?.code, id: r.headers['x-request-id'] };
  }

  it('over-limit bodies through the base URL are 413', async () => {
    const big = new Uint8Array(20 * MiB).fill(0x20);
    const rounds = [
      ['/v2/sql', new Uint8Array(17 * 1_000_000).fill(0x20), key, 'POST'],
      ['/v0/projects', new Uint8Array(100 * 1024).fill(0x20), token, 'POST'],
      ['/v0/signup', big, undefined, 'POST'],
      [`/v0/projects/${projects[0]}/realtime/publish`, big, token, 'POST'],
      [`/v0/projects/${projects[0]}/functions/secrets/BIG`, big, token, 'PUT'],
    ] as const;
    // Several rounds: the lost answer was a race between the upstream's answer and its reset.
    for (let round = 0; round < 3; round++) {
      for (const [path, body, auth, method] of rounds) {
        const r = await send(path, body, auth, method);
        expect(r, `${method} ${path}`).toMatchObject({ status: 413, code: 'payload_too_large' });
        expect(r.id).toMatch(/^req_/);
      }
    }
  }, 60_000);

  it('a body shorter than its Content-Length, then the client shuts its side, is 400 invalid_request', async () => {
    for (const [path, auth] of [['/v0/projects', token], ['/v2/sql', key]] as const) {
      const seen = await rawRequest(post(path, 1_000, auth), { send: 500, shut: true });
      expectRefusal(seen, 400, 'invalid_request');
      expect(seen.endedAfterMs).not.toBeNull();
    }
  });
});

describe('one client cannot break another', () => {
  it("500 concurrent health checks all answer 200 while another client loops refused requests with unread bodies", async () => {
    const noisy = new Agent({ connections: 8 });
    const quiet = new Agent({ connections: 64 });
    let stop = false;
    const refusals = (async () => {
      let n = 0;
      const body = new Uint8Array(200 * 1024).fill(0x20);
      while (!stop) {
        await Promise.all(
          ['/v0/nowhere', '/v0/projects', '/v0/signup', `/v0/projects/${projects[1]}/wakeup`].map(async (path) => {
            const r = await request(`${stack.url}${path}`, { method: 'POST', body, dispatcher: noisy, signal: AbortSignal.timeout(5_000) }).catch(() => null);
            await r?.body.dump().catch(() => {});
            n++;
          }),
        );
      }
      return n;
    })();
    const statuses: Record<string, number> = {};
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(
        Array.from({ length: 500 }, () =>
          request(`${stack.url}/v0/health`, { dispatcher: quiet, signal: AbortSignal.timeout(10_000) }).then(
            async (r) => (await r.body.dump(), String(r.statusCode)),
            (err: Error) => err.message,
          ),
        ),
      );
      for (const a of answers) statuses[a] = (statuses[a] ?? 0) + 1;
    }
    stop = true;
    expect(await refusals).toBeGreaterThan(20);
    await Promise.all([noisy.close(), quiet.close()]);
    expect(statuses).toEqual({ '200': 1500 });
  }, 60_000);
});

describe('open event streams never starve the API', () => {
  it('1,000 subscribers over two projects all get their stream, and every other route still answers', async () => {
    const streams = new Agent({ connections: null, headersTimeout: 30_000, bodyTimeout: 0 });
    const others = new Agent({ connections: 32 });
    const opened: { destroy(): void }[] = [];
    try {
      const firstFrames: Promise<string>[] = [];
      const started = Date.now();
      const subscribed = await Promise.all(
        Array.from({ length: 1_000 }, async (_, i) => {
          const r = await request(`${stack.url}/v0/projects/${projects[i % 2]}/realtime/subscribe?channel=load`, {
            headers: { authorization: `Bearer ${token}` },
            dispatcher: streams,
          });
          opened.push(r.body);
          if (i === 0) {
            // Every frame of this one, to see the event published below arrive.
            let text = '';
            firstFrames.push(
              new Promise((resolve) =>
                r.body.on('data', (d: Buffer) => {
                  text += d.toString('utf8');
                  if (text.includes('event: ping')) resolve(text);
                }),
              ),
            );
          } else r.body.resume();
          return r.statusCode;
        }),
      );
      expect(subscribed.filter((s) => s !== 200)).toEqual([]);
      const openMs = Date.now() - started;

      const t0 = Date.now();
      const health = await Promise.all(
        Array.from({ length: 100 }, () => request(`${stack.url}/v0/health`, { dispatcher: others }).then(async (r) => (await r.body.dump(), r.statusCode))),
      );
      const pub = await request(`${stack.url}/v0/projects/${projects[0]}/realtime/publish`, {
        method: 'POST',
        dispatcher: others,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ channel: 'load', event: 'ping', payload: { n: 1 } }),
      });
      await pub.body.dump();
      const elapsed = Date.now() - t0;
      expect(health.filter((s) => s !== 200)).toEqual([]);
      expect(pub.statusCode).toBe(200);
      expect(elapsed, `1,000 streams opened in ${openMs} ms`).toBeLessThan(5_000);
      expect(await Promise.race([firstFrames[0]!, new Promise<string>((r) => setTimeout(() => r('no event within 5 s'), 5_000))])).toContain(
        'event: ping',
      );
    } finally {
      for (const b of opened) b.destroy();
      await Promise.all([streams.destroy(), others.close()]);
    }
  }, 60_000);
});

describe('absolute-form request targets (RFC 9112 §3.2.2)', () => {
  const get = (target: string, auth?: string, extra = '') =>
    `GET ${target} HTTP/1.1\r\nhost: ignored.test\r\n${auth ? `authorization: Bearer ${auth}\r\n` : ''}${extra}connection: close\r\n\r\n`;

  it('the front serves them through the normal route, /v0 and /v2 alike', async () => {
    const health = await rawRequest(get(`http://127.0.0.1:${port}/v0/health`));
    expect(health.status).toBe(200);
    expect(health.headers['x-request-id']).toMatch(/^req_/);
    const project = await rawRequest(get(`http://front.test/v0/projects/${projects[0]}`, token));
    expect(project.status).toBe(200);
    expect(JSON.parse(project.body).id).toBe(projects[0]);
    const v2 = await rawRequest(get('http://front.test/v2/capabilities', key, 'x-svc-protocol-minor: 3\r\n'));
    expect(v2.status).toBe(200);
    const star = await rawRequest(get('*'));
    expect(star.status).toBe(400);
    expect(JSON.parse(star.body).error.code).toBe('invalid_request');
    expect(star.headers['x-request-id']).toMatch(/^req_/);
  });

  it("the agent's /v2 listener and internal listener serve them too", async () => {
    const agent = stack.agents[0]!;
    const v2 = await rawRequest(get(`${agent.dataplaneUrl}/v2/capabilities`, key, 'x-svc-protocol-minor: 3\r\n'), { to: Number(new URL(agent.dataplaneUrl).port) });
    expect(v2.status).toBe(200);
    expect(v2.headers['x-request-id']).toMatch(/^req_/);
    const internal = await issueInternalToken(stack.env.SVCD_INTERNAL_SECRET!);
    const health = await rawRequest(get(`${agent.internalUrl}/internal/v1/health`, internal), { to: Number(new URL(agent.internalUrl).port) });
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body).agent_id).toBe(agent.id);
    const star = await rawRequest(get('*'), { to: Number(new URL(agent.dataplaneUrl).port) });
    expect(star.status).toBe(400);
    expect(JSON.parse(star.body).error.code).toBe('invalid_request');
  });
});

/**
 * RFC 9112 §3.2 and request-line errors on every listener that faces clients: an unknown method or
 * CONNECT is 501 `not_implemented`, HTTP/1.1 without `Host` or with two is 400 `invalid_request`,
 * each with the envelope and `X-Request-Id` (docs/api.md "Decisions").
 */
async function expectRequestLineErrors(to: number): Promise<void> {
  const cases: [string, number, string][] = [
    ['M-SEARCH /v0/health HTTP/1.1\r\nhost: a\r\n\r\n', 501, 'not_implemented'],
    ['LINK /v2/capabilities HTTP/1.1\r\nhost: a\r\n\r\n', 501, 'not_implemented'],
    ['FROB /v0/health HTTP/1.1\r\nhost: a\r\n\r\n', 501, 'not_implemented'],
    ['CONNECT example.test:443 HTTP/1.1\r\nhost: example.test:443\r\n\r\n', 501, 'not_implemented'],
    ['GET /v0/health HTTP/1.1\r\n\r\n', 400, 'invalid_request'],
    ['GET /v0/health HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n', 400, 'invalid_request'],
  ];
  for (const [head, status, code] of cases) {
    const seen = await rawRequest(head, { to });
    expect(seen.status, head.split('\r\n')[0]).toBe(status);
    expect(seen.headers['content-type'], head).toMatch(/^application\/json/);
    expect(seen.headers['x-request-id'], head).toMatch(/^req_/);
    expect(JSON.parse(seen.body).error.code, head).toBe(code);
  }
  // HTTP/1.0 needs no Host.
  expect((await rawRequest('GET /v0/health HTTP/1.0\r\n\r\n', { to })).status).not.toBe(400);
}

describe('request-line errors (RFC 9112 §3.2) get the error envelope', () => {
  it('at the origin ({base_url})', async () => {
    await expectRequestLineErrors(port);
  });

  it("on the agent's /v2 listener", async () => {
    await expectRequestLineErrors(Number(new URL(stack.agents[0]!.dataplaneUrl).port));
  });

  it('on the Node entry', async () => {
    nodeEntry ??= await startNodeEntry(stack);
    await expectRequestLineErrors(Number(new URL(nodeEntry.url).port));
  }, 30_000);
});

describe('the Node entry (production shape, docs/deploy.md)', () => {
  beforeAll(async () => {
    nodeEntry ??= await startNodeEntry(stack);
  }, 30_000);

  it('serves absolute-form targets and answers a refused body without resetting the connection', async () => {
    const to = Number(new URL(nodeEntry!.url).port);
    const health = await rawRequest(`GET http://x.test/v0/health HTTP/1.1\r\nhost: y\r\nconnection: close\r\n\r\n`, { to });
    expect(health.status).toBe(200);
    // 100 KiB against the 64 KiB JSON limit: read past the limit, refused, the rest drained (once
    // all of it has arrived, the connection may even stay open).
    const seen = await rawRequest(post('/v0/projects', 100 * 1024, token), { send: 100 * 1024, wholeFirst: true, to });
    expect(seen.error).toBeNull();
    expectRefusal(seen, 413, 'payload_too_large', { reusable: true });
    const stalled = await rawRequest(post('/v0/projects', 20 * MiB, token), { send: 256 * 1024, to });
    expectRefusal(stalled, 413, 'payload_too_large');
    expect(stalled.endedAfterMs).not.toBeNull();
  });

  it('holds 300 event streams while other routes answer (no bounded pool on the way to the agent)', async () => {
    const streams = new Agent({ connections: null, bodyTimeout: 0, headersTimeout: 20_000 });
    const opened: { destroy(): void }[] = [];
    try {
      const statuses = await Promise.all(
        Array.from({ length: 300 }, async () => {
          const r = await request(`${nodeEntry!.url}/v0/projects/${projects[1]}/realtime/subscribe?channel=n`, {
            headers: { authorization: `Bearer ${token}` },
            dispatcher: streams,
          });
          opened.push(r.body);
          r.body.resume();
          return r.statusCode;
        }),
      );
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      const health = await request(`${nodeEntry!.url}/v0/health`, { signal: AbortSignal.timeout(5_000) });
      await health.body.dump();
      expect(health.statusCode).toBe(200);
    } finally {
      for (const b of opened) b.destroy();
      await streams.destroy();
    }
  }, 30_000);
});

describe('the origin logs one line per request it relays', () => {
  it('method, path without query, status and duration; never the query nor the Authorization header', async () => {
    // The agent serving the origin logs it (its level debug: SVCD_LOG_LEVEL above), as pino JSON lines;
    // earlier tests logged GETs of the same path, so this one's is the line that comes after them.
    const linesOfPath = () =>
      stack
        .agentLog()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => String((JSON.parse(l) as { msg?: unknown }).msg))
        .filter((l) => l.startsWith(`origin: GET /v0/projects/${projects[0]} `));
    const before = linesOfPath().length;
    const r = await fetch(`${stack.url}/v0/projects/${projects[0]}?ticket=s3cr3t-in-query`, { headers: { authorization: `Bearer ${token}` } });
    await r.arrayBuffer();
    const deadline = Date.now() + 5_000;
    while (linesOfPath().length === before && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    const line = linesOfPath()[before];
    expect(line).toMatch(new RegExp(`^origin: GET /v0/projects/${projects[0]} ${r.status} \\d+\\.\\d ms$`));
    expect(stack.agentLog()).not.toContain('s3cr3t-in-query');
    expect(stack.agentLog()).not.toContain(token);
    expect(logged.join('\n')).not.toContain('s3cr3t-in-query');
  });
});
