/**
 * The local stack's child processes (docs/local-stack.md): each prints one JSON ready line first,
 * and is stopped with SIGTERM, then SIGKILL to its process group after a grace period.
 */
import type { ChildProcess } from 'node:child_process';

/** Resolves with `child`'s first stdout line parsed as JSON (its ready line). */
export function awaitReadyLine(child: ChildProcess, what: string, timeoutMs: number, output: () => string): Promise<Record<string, unknown>> {
  return new Promise((ok, fail) => {
    let buf = '';
    const timer = setTimeout(() => fail(new Error(`${what} did not become ready within ${timeoutMs} ms: ${output()}`)), timeoutMs);
    child.stdout!.setEncoding('utf8').on('data', function onData(d: string) {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      child.stdout!.off('data', onData);
      // Keep draining stdout so the child never blocks on a full pipe.
      child.stdout!.on('data', () => {});
      clearTimeout(timer);
      try {
        ok(JSON.parse(buf.slice(0, nl)));
      } catch {
        fail(new Error(`${what} printed an unexpected first line: ${buf.slice(0, nl)}`));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`${what} exited with ${code} during start: ${output().trim().split('\n').slice(-3).join(' | ')}`));
    });
  });
}

/** Stops a child: SIGTERM, then SIGKILL (to its process group when it leads one) after `graceMs`; resolves when it has exited. */
export async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  }, graceMs);
  await exited;
  clearTimeout(t);
}

/** How a child ended, for a log line. */
export function exitOf(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ? `signal ${signal}` : `code ${code}`;
}
