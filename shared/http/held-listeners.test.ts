/**
 * Listeners a supervisor holds for a child (docs/local-stack.md "Ports"), over real processes and
 * sockets: the child serves the held port without binding it, whether it accepts a connection
 * itself or the supervisor's copy does; while no child holds it the fallback answers; a child
 * started again serves the same port, which nothing could take meanwhile.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { giveWhenAsked, HeldListener } from './held-listeners.ts';

const MODULE = new URL('./held-listeners.ts', import.meta.url).href;
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** A child that serves SVCD_TEST_PORT with node:http, answering its pid. */
function child(port: number): ChildProcess {
  const code = `
    const { createServer } = await import('node:http');
    const { ReceivedListeners } = await import(${JSON.stringify(MODULE)});
    const held = new ReceivedListeners({ SVCD_TEST_PORT: ${port} });
    const server = createServer((req, res) => res.end(String(process.pid)));
    held.attach('SVCD_TEST_PORT', server);`;
  const c = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  children.push(c);
  return c;
}

async function get(port: number): Promise<string> {
  const r = await fetch(`http://127.0.0.1:${port}/`, { headers: { connection: 'close' } });
  return r.text();
}

describe('held listeners', () => {
  it('a child serves the held port, the fallback while none holds it, and a new child the same port', async () => {
    const held = await HeldListener.bind('SVCD_TEST_PORT', '127.0.0.1', 0, (socket) => socket.end('HTTP/1.1 503 Service Unavailable\r\ncontent-length: 8\r\nconnection: close\r\n\r\nfallback'));
    try {
      expect(await get(held.port)).toBe('fallback');
      const first = child(held.port);
      giveWhenAsked(first, [held]);
      await new Promise((r) => first.once('message', r));
      // Whichever process accepts a connection, the child answers it.
      const answers = new Set<string>();
      for (let i = 0; i < 20; i++) answers.add(await get(held.port));
      expect([...answers]).toEqual([String(first.pid)]);
      first.kill('SIGKILL');
      await new Promise((r) => first.once('exit', r));
      expect(await get(held.port)).toBe('fallback');
      // Nothing can take the port meanwhile, not even as a connection's source port.
      const code = await new Promise<string>((resolve) => {
        const s = connect({ port: held.port, host: '127.0.0.1', localAddress: '127.0.0.1', localPort: held.port });
        s.once('connect', () => (s.destroy(), resolve('connected')));
        s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? ''));
      });
      expect(code).toBe('EADDRINUSE');
      const second = child(held.port);
      giveWhenAsked(second, [held]);
      await new Promise((r) => second.once('message', r));
      expect(await get(held.port)).toBe(String(second.pid));
    } finally {
      await held.close();
    }
  }, 30_000);
});
