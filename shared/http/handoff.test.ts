import { spawn, type ChildProcess } from 'node:child_process';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handOver, peekFirstLine, serveConnection } from './handoff.ts';

/**
 * A real child process on an IPC channel: its HTTP server answers every request with the method,
 * path and the number of body bytes it received, and whether it was the child that answered.
 */
const CHILD = `
import { createServer } from 'node:http';
import { receiveHandedConnections, serveConnection } from ${JSON.stringify(new URL('./handoff.ts', import.meta.url).pathname)};
const server = createServer((req, res) => {
  let n = 0;
  req.on('data', (d) => (n += d.length));
  req.on('end', () => res.end('child ' + req.method + ' ' + req.url + ' ' + n + '\\n'));
});
receiveHandedConnections((socket, head) => serveConnection(server, socket, head));
process.send('ready');
`;

let child: ChildProcess;
let front: Server;
let port: number;

beforeAll(async () => {
  child = spawn(process.execPath, ['--input-type=module', '-e', CHILD], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  await new Promise((resolve) => child.once('message', resolve));
  // The front: connections whose first line names /hand go to the child, the others to its own server.
  const own = createHttpServer((req, res) => {
    let n = 0;
    req.on('data', (d: Buffer) => (n += d.length));
    req.on('end', () => res.end(`front ${req.method} ${req.url} ${n}\n`));
  });
  front = createServer({ pauseOnConnect: true }, (socket) =>
    peekFirstLine(socket, (head) => {
      if (head.toString('latin1').includes(' /hand') && handOver(child, socket, head, 'http://front.test')) return;
      serveConnection(own, socket, head);
    }),
  );
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  port = (front.address() as AddressInfo).port;
});
afterAll(() => {
  front?.close();
  child?.kill();
});

/** Sends `parts` with `gapMs` between them, then reads until the server has answered `answers` times. */
function exchange(parts: (string | Buffer)[], answers: number, gapMs = 0): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      text += d;
      if (text.split('HTTP/1.1 200').length - 1 === answers && /\n$/.test(text)) {
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('error', reject);
    void (async () => {
      for (const p of parts) {
        socket.write(p);
        if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
      }
    })();
  });
}

const request = (method: string, path: string, body = Buffer.alloc(0)) =>
  Buffer.concat([Buffer.from(`${method} ${path} HTTP/1.1\r\nhost: t\r\ncontent-length: ${body.byteLength}\r\n\r\n`), body]);

describe('handing a connection to another process', () => {
  it('delivers every byte in order, the bytes read before the hand-over first, whatever the sizes and timing', async () => {
    const runs = Array.from({ length: 40 }, async (_, i) => {
      const body = Buffer.alloc(1 + ((i * 7919) % 400_000), 0x61 + (i % 26));
      const first = request('POST', '/hand/a', body);
      // The first request split at odd places, then a second request on the same connection.
      const cut = [10, 100, 70_000][i % 3]!;
      const out = await exchange([first.subarray(0, cut), first.subarray(cut), request('PUT', '/v0/b', body)], 2, i % 2 ? 5 : 0);
      expect(out).toContain(`child POST /hand/a ${body.byteLength}\n`);
      expect(out).toContain(`child PUT /v0/b ${body.byteLength}\n`);
    });
    await Promise.all(runs);
  }, 60_000);

  it('keeps a connection whose first line says otherwise, bytes and all', async () => {
    const body = Buffer.alloc(300_000, 0x62);
    const first = request('POST', '/v0/kept', body);
    const out = await exchange([first.subarray(0, 20), first.subarray(20), request('GET', '/hand/later')], 2, 5);
    expect(out).toContain(`front POST /v0/kept ${body.byteLength}\n`);
    expect(out).toContain('front GET /hand/later 0\n');
  });
});
