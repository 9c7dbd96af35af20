/**
 * Realtime subscribe's own rules (client/realtime.ts; docs/realtime.md "The stream") against a real
 * local event-stream server: reconnect after a stream ends or goes silent, stop at `overflow` and at
 * a refusal.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from './client.ts';
import { RealtimeOverflowError, SvcError } from './errors.ts';

let base: string;
let connections = 0;
let script: (res: ServerResponse, n: number) => void = () => {};
const requests: { method: string; url: string; auth: string | undefined }[] = [];
const server = createServer((req, res) => {
  requests.push({ method: req.method!, url: req.url!, auth: req.headers.authorization });
  if (req.method === 'POST') {
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ticket: `rtt_${String(requests.length).padStart(64, '0')}`, project: 'prj_0123456789abcdef', channels: ['chat'], expires_at: 't', subscribe_url: '/' }));
    return;
  }
  connections++;
  script(res, connections);
});

beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const event = (id: number) => `id: ${id}\nevent: message\ndata: ${JSON.stringify({ id, channel: 'chat', event: 'message', payload: id, ts: 't' })}\n\n`;
const open = (res: ServerResponse) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(': subscribed\n\n');
};
const subscribe = (options: Parameters<ReturnType<ReturnType<typeof createClient>['project']>['realtime']['subscribe']>[1] = {}) =>
  createClient({ baseUrl: base, key: 'svc1_k' }).project('prj_0123456789abcdef').realtime.subscribe(['chat'], { maxBackoffMs: 20, ...options });

describe('subscribe', () => {
  it('reconnects when the stream ends and goes on delivering', async () => {
    connections = 0;
    script = (res, n) => {
      open(res);
      res.end(event(n));
    };
    const ids = [];
    let opens = 0;
    for await (const e of subscribe({ onOpen: () => opens++ })) {
      ids.push(e.id);
      if (ids.length === 3) break;
    }
    expect(ids).toEqual([1, 2, 3]);
    expect(opens).toBe(3);
  });

  it('reopens a stream that stays silent past idleTimeoutMs', async () => {
    connections = 0;
    script = (res, n) => {
      open(res);
      if (n > 1) res.write(event(n));
    };
    const started = Date.now();
    for await (const e of subscribe({ idleTimeoutMs: 150 })) {
      expect(e.id).toBe(2);
      break;
    }
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
  });

  it('reopens a subscription whose answer never comes', async () => {
    connections = 0;
    script = (res, n) => {
      if (n === 1) return; // never answered
      open(res);
      res.write(event(n));
    };
    for await (const e of subscribe({ idleTimeoutMs: 150 })) {
      expect(e.id).toBe(2);
      break;
    }
  });

  it('ends with RealtimeOverflowError at an overflow frame', async () => {
    script = (res) => {
      open(res);
      res.end('event: overflow\ndata: {"reason":"subscriber queue full","queue":1024,"dropped":1025}\n\n');
    };
    const err = await (async () => {
      for await (const _ of subscribe()) {
        // none
      }
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RealtimeOverflowError);
    expect((err as RealtimeOverflowError).detail).toMatchObject({ queue: 1024, dropped: 1025 });
  });

  it('opens each stream with a fresh ticket when asked (as in browsers), sending no credential on the stream', async () => {
    requests.length = 0;
    script = (res, n) => {
      open(res);
      res.end(event(n));
    };
    let seen = 0;
    for await (const _ of subscribe({ tickets: true })) if (++seen === 2) break;
    expect(requests.map((r) => [r.method, r.auth !== undefined])).toEqual([
      ['POST', true],
      ['GET', false],
      ['POST', true],
      ['GET', false],
    ]);
    expect(requests[1]!.url).toMatch(/\/realtime\/subscribe\?channel=chat&ticket=rtt_0+1$/);
  });

  it('retries 503 and stops at 401', async () => {
    connections = 0;
    script = (res, n) => {
      const [status, code] = n === 1 ? [503, 'orchestrator_unavailable'] : [401, 'authentication_required'];
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code, message: code } }));
    };
    const err = await (async () => {
      for await (const _ of subscribe()) {
        // none
      }
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SvcError);
    expect(err).toMatchObject({ status: 401, code: 'authentication_required' });
    expect(connections).toBe(2);
  });
});
