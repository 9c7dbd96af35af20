/**
 * keepAnswersConnect's other side: a connection whose write failed is held only for its read side
 * to report, so a server that resets without answering still fails the request, promptly (that the
 * early answer is relayed is tested through the front, infra/local/front-proxy.test.ts). And the
 * status line of a forwarded answer: the upstream's reason phrase reaches the client as sent.
 */
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { describe, expect, it } from 'vitest';
import { forward, keepAnswersConnect, upstreamRequestHeaders } from './forward.ts';

describe('keepAnswersConnect', () => {
  it('still fails a request the server reset without answering', async () => {
    const silent = createServer((socket) => {
      socket.once('data', () => socket.resetAndDestroy());
      socket.on('error', () => {});
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const pool = new Pool(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`, { connect: keepAnswersConnect(5_000) });
    try {
      const started = Date.now();
      await expect(pool.request({ path: '/', method: 'PUT', body: new Uint8Array(8 * 1024 * 1024) })).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      await pool.destroy();
      silent.close();
    }
  });
});

describe('forward', () => {
  it("relays the upstream's status line as it wrote it: its reason phrase, an empty one, UTF-8 bytes", async () => {
    // The upstream answers with the status line the request's path names (after the `/`, percent-decoded).
    const upstream = createServer((socket) => {
      socket.once('data', (d: Buffer) => {
        const line = Buffer.from(decodeURIComponent(d.toString('latin1').split(' ')[1]!.slice(1)), 'utf8');
        socket.end(Buffer.concat([line, Buffer.from('\r\ncontent-length: 2\r\n\r\nok', 'latin1')]));
      });
      socket.on('error', () => {});
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const pool = new Pool(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, { connect: keepAnswersConnect(5_000), pipelining: 0 });
    const relay = createHttpServer((req, res) => {
      void forward(pool, req, res, { method: req.method!, path: req.url!, headers: upstreamRequestHeaders(req, new Set()), body: null, reset: true }).catch(() => res.destroy());
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const statusLine = (line: string) =>
      new Promise<Buffer>((resolve, reject) => {
        const socket = connect((relay.address() as AddressInfo).port, '127.0.0.1', () =>
          socket.write(`GET /${encodeURIComponent(line)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`),
        );
        const chunks: Buffer[] = [];
        socket.on('data', (c: Buffer) => chunks.push(c));
        socket.on('error', reject);
        socket.on('close', () => {
          const all = Buffer.concat(chunks);
          resolve(all.subarray(0, all.indexOf('\r\n')));
        });
      });
    try {
      for (const line of ['HTTP/1.1 203 Seen By Function', 'HTTP/1.1 404 Gone Fishing', 'HTTP/1.1 200 ', 'HTTP/1.1 200 Gesehen – ü']) {
        expect((await statusLine(line)).toString('utf8')).toBe(line);
      }
      // No reason phrase at all: relayed as an empty one, which says as much.
      expect((await statusLine('HTTP/1.1 200')).toString('utf8')).toBe('HTTP/1.1 200 ');
    } finally {
      relay.close();
      await pool.destroy();
      upstream.close();
    }
  });
});
