/**
 * The `/v2` listener's streaming behaviour (docs/dataplane.md "The `/v2` listener": large bodies with flat memory, a client
 * that disconnects mid-stream leaks nothing, hop-by-hop headers, the body limit, an upstream gone).
 *
 * The upstream here is a plain node:http server standing in only for the engine's byte-sink role:
 * the reference engine reads a whole `/v2/sql` body into memory and the supervisor starts it with
 * its default 1 MiB body limit, so it cannot take or answer 50 MiB. Keys are real (issued through
 * the handlers, verified against DynamoDB Local); the listener is the agent's own code
 * (host-agent/dataplane/server.ts) with the endpoint of the stand-in in place of a running engine.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { Client } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyCache } from '../../host-agent/dataplane/key-cache.ts';
import { startDataplane, type Dataplane } from '../../host-agent/dataplane/server.ts';
import { lookupKey } from '../../shared/db/keys.ts';
import { rssGrowth } from '../helpers/memory.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';
import { lazyBytes } from '../helpers/bytes.ts';

const MiB = 1024 * 1024;

/** The stand-in upstream: counts what it receives, streams what it is asked for, remembers what is open. */
interface Sink {
  server: Server;
  port: number;
  open: Set<IncomingMessage>;
  seen: { method: string; url: string; headers: IncomingMessage['headers']; bytes: number; complete: boolean }[];
  closed: Promise<void>[];
}


async function startSink(): Promise<Sink> {
  const open = new Set<IncomingMessage>();
  const seen: Sink['seen'] = [];
  const closed: Promise<void>[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    open.add(req);
    const record = { method: req.method!, url: req.url!, headers: req.headers, bytes: 0, complete: false };
    seen.push(record);
    closed.push(new Promise((r) => res.once('close', () => (open.delete(req), r()))));
    const url = new URL(req.url!, 'http://sink');
    if (url.pathname === '/v2/drop') return void req.socket.destroy();
    if (url.pathname === '/v2/download') {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': url.searchParams.get('bytes')! });
      return void lazyBytes(Number(url.searchParams.get('bytes'))).pipe(res);
    }
    if (url.pathname === '/v2/headers') {
      res.setHeader('x-svc-request-id', 'req_0123456789abcdef');
      res.setHeader('set-cookie', ['a=1', 'b=2']);
      res.setHeader('connection', 'x-upstream-private');
      res.setHeader('x-upstream-private', 'secret-ish');
      res.setHeader('keep-alive', 'timeout=5');
      res.writeHead(207, { 'content-type': 'application/vnd.svc.product-v1' });
      return void res.end('answer');
    }
    req.on('data', (c: Buffer) => (record.bytes += c.length));
    req.on('end', () => {
      record.complete = true;
      if (url.pathname === '/v2/hang') return;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ bytes: record.bytes }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port, open, seen, closed };
}

let svc: TestService;
let sink: Sink;
let plane: Dataplane;
let small: Dataplane;
let key: string;
let projectId: string;
let client: Client;

beforeAll(async () => {
  svc = await startTestService();
  const { token } = await signup(svc);
  const p = await svc.request('POST', '/v0/projects', { token, body: { name: 'stream' } });
  projectId = ((await p.json()) as { id: string }).id;
  key = ((await (await svc.request('POST', `/v0/projects/${projectId}/keys`, { token, body: {} })).json()) as { key: string }).key;
  sink = await startSink();
  const keys = new KeyCache({ pepper: svc.env.SVCD_KEY_PEPPER!, load: (id) => lookupKey(svc.db, id) });
  const endpoints = { liveEndpoint: (p: string) => (p === projectId ? { host: '127.0.0.1', port: sink.port } : null) };
  plane = await startDataplane({ host: '127.0.0.1', port: 0, maxBytes: 64 * MiB, endpoints, keys, log: () => {} });
  small = await startDataplane({ host: '127.0.0.1', port: 0, maxBytes: MiB, endpoints, keys, log: () => {} });
  client = new Client(plane.url);
});
afterAll(async () => {
  await client?.close();
  await plane?.close();
  await small?.close();
  await new Promise((r) => sink?.server.close(r));
  await svc?.stop();
});

const auth = () => ({ authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3' });


describe('large bodies stream through with flat memory', () => {
  it('warms up (so first-use allocations do not count as growth)', async () => {
    const r = await client.request({ method: 'POST', path: '/v2/sql', headers: { ...auth(), 'content-length': String(8 * MiB) }, body: lazyBytes(8 * MiB) });
    expect(await r.body.json()).toEqual({ bytes: 8 * MiB });
    const c = await client.request({ method: 'POST', path: '/v2/sql', headers: auth(), body: lazyBytes(8 * MiB) });
    expect(await c.body.json()).toEqual({ bytes: 8 * MiB });
    const d = await client.request({ method: 'GET', path: `/v2/download?bytes=${8 * MiB}`, headers: auth() });
    for await (const _ of d.body) void _;
  });

  it('uploads 50 MiB with Content-Length: RSS grows by less than 20 MiB', async () => {
    let answer: unknown;
    const growth = await rssGrowth(async () => {
      const r = await client.request({
        method: 'POST',
        path: '/v2/sql',
        headers: { ...auth(), 'content-length': String(50 * MiB) },
        body: lazyBytes(50 * MiB),
      });
      answer = await r.body.json();
    });
    expect(answer).toEqual({ bytes: 50 * MiB });
    expect(growth).toBeLessThan(20 * MiB);
  });

  it('uploads 50 MiB chunked (counted against the limit as it streams): RSS grows by less than 20 MiB', async () => {
    let answer: unknown;
    const growth = await rssGrowth(async () => {
      const r = await client.request({ method: 'PUT', path: '/v2/blob', headers: auth(), body: lazyBytes(50 * MiB) });
      answer = await r.body.json();
    });
    expect(answer).toEqual({ bytes: 50 * MiB });
    expect(sink.seen.at(-1)!.headers['transfer-encoding']).toBe('chunked');
    expect(growth).toBeLessThan(20 * MiB);
  });

  it('downloads 50 MiB: RSS grows by less than 20 MiB and the length is passed through', async () => {
    let bytes = 0;
    let length: unknown;
    const growth = await rssGrowth(async () => {
      const r = await client.request({ method: 'GET', path: `/v2/download?bytes=${50 * MiB}`, headers: auth() });
      length = r.headers['content-length'];
      for await (const c of r.body) bytes += (c as Buffer).length;
    });
    expect(length).toBe(String(50 * MiB));
    expect(bytes).toBe(50 * MiB);
    expect(growth).toBeLessThan(20 * MiB);
  });
});

describe('a client that disconnects mid-stream', () => {
  async function settled(): Promise<void> {
    await Promise.all(sink.closed);
    await new Promise((r) => setTimeout(r, 50));
  }

  it('mid-upload: the upstream request is aborted, nothing stays open', async () => {
    const before = sink.seen.length;
    const socket = connect(plane.port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    socket.write(`POST /v2/sql HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-length: ${10 * MiB}\r\n\r\n`);
    socket.write(Buffer.alloc(MiB));
    for (let i = 0; i < 200 && sink.seen.length === before; i++) await new Promise((r) => setTimeout(r, 10));
    expect(sink.seen.length).toBe(before + 1);
    socket.destroy();
    await settled();
    expect(sink.open.size).toBe(0);
    expect(sink.seen.at(-1)!.complete).toBe(false);
    const conns = await new Promise<number>((r) => plane.server.getConnections((_, n) => r(n)));
    expect(conns).toBe(1); // only the test's own keep-alive client
  });

  it('before a small body has fully arrived: nothing is forwarded, nothing stays open', async () => {
    const before = sink.seen.length;
    const socket = connect(plane.port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    socket.write(`POST /v2/sql HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-length: 1000\r\n\r\n{"sql":`);
    await new Promise((r) => setTimeout(r, 100));
    socket.destroy();
    await settled();
    expect(sink.seen.length).toBe(before);
    const conns = await new Promise<number>((r) => plane.server.getConnections((_, n) => r(n)));
    expect(conns).toBe(1);
  });

  it('mid-download: the upstream response is abandoned, nothing stays open', async () => {
    const c = new Client(plane.url);
    const r = await c.request({ method: 'GET', path: `/v2/download?bytes=${200 * MiB}`, headers: auth() });
    let got = 0;
    for await (const chunk of r.body) {
      got += (chunk as Buffer).length;
      if (got > 2 * MiB) break;
    }
    await c.destroy();
    await settled();
    expect(sink.open.size).toBe(0);
    const conns = await new Promise<number>((res) => plane.server.getConnections((_, n) => res(n)));
    expect(conns).toBe(1);
  });
});

describe('the body limit (SVCD_DATAPLANE_MAX_BYTES)', () => {
  it('refuses a declared body over the limit with 413 before anything is forwarded', async () => {
    const before = sink.seen.length;
    const socket = connect(small.port, '127.0.0.1');
    let answer = '';
    socket.setEncoding('utf8').on('data', (d: string) => (answer += d));
    socket.write(`POST /v2/sql HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-length: ${MiB + 1}\r\n\r\n`);
    await new Promise((r) => socket.once('close', r));
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toMatch(/x-request-id: req_[0-9a-f]{16}/i);
    expect(answer).toContain('"code":"payload_too_large"');
    expect(sink.seen.length).toBe(before);
  });

  it('cuts off a chunked body at the limit with 413; the upstream never receives a complete request', async () => {
    const before = sink.seen.length;
    const c = new Client(small.url);
    const r = await c.request({ method: 'POST', path: '/v2/hang', headers: auth(), body: lazyBytes(4 * MiB) });
    expect(r.statusCode).toBe(413);
    expect(r.headers['x-request-id']).toMatch(/^req_[0-9a-f]{16}$/);
    expect(((await r.body.json()) as any).error.code).toBe('payload_too_large');
    await c.destroy();
    await Promise.all(sink.closed);
    for (const s of sink.seen.slice(before)) {
      expect(s.complete).toBe(false);
      expect(s.bytes).toBeLessThanOrEqual(MiB);
    }
    expect(sink.open.size).toBe(0);
  });

  it('answers Expect: 100-continue only once every check passed, so a refused client never sends its body', async () => {
    const exchange = async (port: number, length: number, auth: string) => {
      const socket = connect(port, '127.0.0.1');
      const closed = new Promise((r) => socket.once('close', r));
      let text = '';
      socket.setEncoding('latin1').on('data', (d: string) => (text += d));
      socket.write(`POST /v2/sql HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${auth}\r\ncontent-length: ${length}\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n`);
      for (let i = 0; i < 200 && !/\r\n\r\n/.test(text); i++) await new Promise((r) => setTimeout(r, 5));
      const first = text;
      if (first.startsWith('HTTP/1.1 100')) socket.write(Buffer.alloc(length, 0x62));
      await closed;
      return { first, all: text };
    };
    const refused = await exchange(small.port, 2 * MiB, key);
    expect(refused.first).toMatch(/^HTTP\/1\.1 413 /);
    const unauthenticated = await exchange(small.port, 10, 'nope');
    expect(unauthenticated.first).toMatch(/^HTTP\/1\.1 401 /);
    const accepted = await exchange(small.port, 1000, key);
    expect(accepted.first).toMatch(/^HTTP\/1\.1 100 Continue/);
    expect(accepted.all).toContain('{"bytes":1000}');
    expect(sink.seen.at(-1)!.headers.expect).toBeUndefined();
  });

  it('passes a body exactly at the limit', async () => {
    const c = new Client(small.url);
    const r = await c.request({ method: 'POST', path: '/v2/sql', headers: auth(), body: lazyBytes(MiB) });
    expect(await r.body.json()).toEqual({ bytes: MiB });
    await c.close();
  });
});

describe('headers and upstream failures', () => {
  it('strips hop-by-hop headers and the credential both ways, keeping everything else unchanged', async () => {
    // A raw request: clients (undici included) refuse to send a Connection header listing names.
    const socket = connect(plane.port, '127.0.0.1');
    socket.write(
      `GET /v2/headers?x=1 HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\nx-svc-protocol-minor: 3\r\n` +
        `connection: close, x-client-private\r\nx-client-private: 1\r\nte: trailers\r\nkeep-alive: timeout=1\r\n` +
        `x-svc-project: ${projectId}\r\nx-custom: kept\r\n\r\n`,
    );
    const raw = await new Promise<string>((r) => {
      let text = '';
      socket.setEncoding('latin1').on('data', (d: string) => (text += d)).on('close', () => r(text));
    });
    const seen = sink.seen.at(-1)!;
    expect(seen.url).toBe('/v2/headers?x=1');
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-client-private']).toBeUndefined();
    expect(seen.headers.te).toBeUndefined();
    expect(seen.headers['x-custom']).toBe('kept');
    expect(seen.headers['x-svc-protocol-minor']).toBe('3');
    expect(seen.headers['keep-alive']).toBeUndefined();
    expect(seen.headers['x-svc-project']).toBe(projectId);
    const [head, body] = raw.split('\r\n\r\n') as [string, string];
    const lines = head.split('\r\n').map((l) => l.toLowerCase());
    expect(lines[0]).toBe('http/1.1 207 multi-status');
    expect(lines).toContain('content-type: application/vnd.svc.product-v1');
    expect(lines).toContain('x-svc-request-id: req_0123456789abcdef');
    expect(lines).toContain('set-cookie: a=1');
    expect(lines).toContain('set-cookie: b=2');
    expect(lines.some((l) => l.startsWith('x-upstream-private'))).toBe(false);
    expect(lines.some((l) => l.startsWith('keep-alive: timeout=5'))).toBe(false);
    expect(lines.some((l) => /^x-request-id: req_[0-9a-f]{16}$/.test(l))).toBe(true);
    expect(body).toContain('answer');
  });

  it('answers 502 upstream_unavailable when the upstream drops the connection before answering', async () => {
    const r = await client.request({ method: 'POST', path: '/v2/drop', headers: auth(), body: 'x' });
    expect(r.statusCode).toBe(502);
    expect(r.headers['x-request-id']).toMatch(/^req_[0-9a-f]{16}$/);
    expect(((await r.body.json()) as any).error.code).toBe('upstream_unavailable');
  });

  it('answers 502 when nothing listens at the engine address any more', async () => {
    const gone = createServer();
    await new Promise<void>((r) => gone.listen(0, '127.0.0.1', r));
    const port = (gone.address() as AddressInfo).port;
    await new Promise((r) => gone.close(r));
    const keys = new KeyCache({ pepper: svc.env.SVCD_KEY_PEPPER!, load: (id) => lookupKey(svc.db, id) });
    const p = await startDataplane({ host: '127.0.0.1', port: 0, maxBytes: MiB, endpoints: { liveEndpoint: () => ({ host: '127.0.0.1', port }) }, keys, log: () => {} });
    try {
      const r = await fetch(`${p.url}/v2/sql`, { method: 'POST', headers: auth(), body: '{}' });
      expect(r.status).toBe(502);
      expect(((await r.json()) as any).error.code).toBe('upstream_unavailable');
    } finally {
      await p.close();
    }
  });
});
