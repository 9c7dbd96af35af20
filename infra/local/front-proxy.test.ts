/**
 * The front's connection handling against a raw upstream that misbehaves on purpose (real sockets,
 * nothing mocked): a pooled connection reset under a request that had no body is retried once on a
 * fresh connection, and only for idempotent methods; an answer given before the body was read is
 * relayed although the upstream reset the upload (docs/dataplane.md "Refused bodies"). And what it
 * relays, both ways: a request's headers as the client sent them less the hop-by-hop ones, nothing
 * added, and an answer's status line as the upstream wrote it (docs/dataplane.md "One base URL").
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricsTarget, startFront, type Front } from './front-proxy.ts';

let upstream: Server;
let front: Front;
const lines: string[] = [];
let connections = 0;

/**
 * Answers the first request of each connection (kept alive), and resets the connection on the
 * second. A request with a body is refused at once (413), and the connection closed with the body
 * unread, as workerd does: the kernel resets it under the upload.
 */
function serve(socket: Socket): void {
  connections++;
  let seen = '';
  let answered = 0;
  socket.on('data', function onData(d: Buffer) {
    seen += d.toString('latin1');
    while (seen.includes('\r\n\r\n')) {
      const head = seen.slice(0, seen.indexOf('\r\n\r\n'));
      seen = seen.slice(seen.indexOf('\r\n\r\n') + 4);
      if (/\r\ncontent-length: *[1-9]/i.test(head)) {
        socket.off('data', onData);
        const body = '{"error":{"code":"payload_too_large","message":"too big"}}';
        socket.write(`HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`, () => socket.destroy());
        return;
      }
      if (answered++ > 0) {
        socket.resetAndDestroy();
        return;
      }
      const path = head.split(' ')[1];
      const body = JSON.stringify({ path, connection: connections });
      socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    }
  });
  socket.on('error', () => {});
}

beforeAll(async () => {
  upstream = createServer(serve);
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  front = await startFront({ handlers: url, dataplane: url }, { host: '127.0.0.1', port: 0, log: (l) => lines.push(l) });
});
afterAll(async () => {
  await front?.close();
  upstream?.close();
});

async function get(path: string, method = 'GET') {
  const r = await fetch(`${front.url}${path}`, { method });
  return { status: r.status, body: (await r.json()) as { path?: string; error?: { code: string } } };
}

describe('the front and a misbehaving upstream', () => {
  it('a reset pooled connection is retried once on a fresh connection for a GET, never for a POST', async () => {
    expect(await get('/v0/one')).toMatchObject({ status: 200, body: { path: '/v0/one' } });
    // The pooled connection is reset under this one before any answer: a POST may have been
    // applied, so it is not sent again.
    expect(await get('/v0/two', 'POST')).toMatchObject({ status: 503, body: { error: { code: 'orchestrator_unavailable' } } });
    expect(await get('/v0/three')).toMatchObject({ status: 200, body: { path: '/v0/three' } });
    // Reset again under a GET: answered from a fresh connection.
    expect(await get('/v0/four')).toMatchObject({ status: 200, body: { path: '/v0/four' } });
    expect(await get('/v2/five')).toMatchObject({ status: 200, body: { path: '/v2/five' } });
    expect(await get('/v2/six', 'DELETE')).toMatchObject({ status: 200, body: { path: '/v2/six' } });
  });

  it('an answer given before the body was read is relayed although the upload then failed', async () => {
    const body = new Uint8Array(20 * 1024 * 1024);
    for (let i = 0; i < 5; i++) {
      const r = await fetch(`${front.url}/v0/upload`, { method: 'PUT', body });
      expect(r.status).toBe(413);
      expect(r.headers.get('connection')).toBe('close');
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
    }
  });

  it('logs each request in one line', () => {
    expect(lines).toContainEqual(expect.stringMatching(/^front: GET \/v0\/four 200 \d+\.\d ms$/));
    expect(lines).toContainEqual(expect.stringMatching(/^front: POST \/v0\/two 503 \d+\.\d ms$/));
  });
});

describe('what the front relays', () => {
  it("adds no header to a request, and passes the upstream's status line on as it was written", async () => {
    // Records each request's head; answers with the reason phrase its path names.
    const heads: string[] = [];
    const recorder = createServer((socket) => {
      let seen = '';
      socket.on('data', (d: Buffer) => {
        seen += d.toString('latin1');
        if (!seen.includes('\r\n\r\n')) return;
        const head = seen.slice(0, seen.indexOf('\r\n\r\n'));
        heads.push(head);
        const reason = decodeURIComponent(head.split(' ')[1]!.split('/').pop()!);
        socket.end(`HTTP/1.1 299 ${reason}\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok`);
      });
      socket.on('error', () => {});
    });
    await new Promise<void>((r) => recorder.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(recorder.address() as AddressInfo).port}`;
    const relay = await startFront({ handlers: url, dataplane: url }, { host: '127.0.0.1', port: 0, log: () => {} });
    const exchange = (path: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(relay.port, '127.0.0.1', () =>
          socket.write(`GET ${path} HTTP/1.1\r\nHost: public.example:443\r\nX-Client: one\r\nX-Client: two\r\nAccept: */*\r\nX-Hop: h\r\nConnection: close, X-Hop\r\n\r\n`),
        );
        let text = '';
        socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
        socket.on('error', reject);
        socket.on('close', () => resolve(text));
      });
    try {
      for (const path of ['/v0/projects/prj_1/functions/f/invoke/Seen%20By%20Function', '/v2/Custom%20Reason']) {
        heads.length = 0;
        const answer = await exchange(path);
        expect(answer.split('\r\n', 1)[0], path).toBe(`HTTP/1.1 299 ${decodeURIComponent(path.split('/').pop()!)}`);
        const lines = heads[0]!.split('\r\n').slice(1).map((l) => l.toLowerCase());
        // The client's headers in order, less the hop-by-hop ones; nothing else but the hop's own Host and Connection.
        expect(lines.filter((l) => !/^(?:host|connection):/.test(l)), path).toEqual(['x-client: one', 'x-client: two', 'accept: */*']);
      }
    } finally {
      await relay.close();
      recorder.close();
    }
  });
});

describe('metricsTarget', () => {
  it('sends /metrics to the first agent and /metrics/<n> to the n-th, nothing else', () => {
    expect(metricsTarget('/metrics')).toBe(0);
    expect(metricsTarget('/metrics?x=1')).toBe(0);
    expect(metricsTarget('/metrics/2')).toBe(1);
    expect(metricsTarget('/metricsx')).toBeNull();
    expect(metricsTarget('/v0/metrics')).toBeNull();
  });
});
