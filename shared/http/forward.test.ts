/**
 * keepAnswersConnect's other side: a connection whose write failed is held only for its read side
 * to report, so a server that resets without answering still fails the request, promptly (that the
 * early answer is relayed is tested through the front, infra/local/front-proxy.test.ts).
 */
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { describe, expect, it } from 'vitest';
import { keepAnswersConnect } from './forward.ts';

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
