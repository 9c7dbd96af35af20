/**
 * Runs the handlers bundle (dist/worker.js) inside miniflare (workerd) on SVCD_HOST:SVCD_PORT, with
 * every `SVCD_*` setting as a binding. A process of its own because miniflare installs exit hooks on
 * SIGINT/SIGTERM: the stack supervisor stays in charge of its own shutdown. Prints one ready line.
 *
 * Its stdin is a pipe from the supervisor: end of file means the supervisor is gone (even killed
 * with SIGKILL), and this process disposes miniflare (which kills workerd) and exits, so nothing
 * outlives the stack (docs/local-stack.md "Processes").
 */
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { Miniflare } from 'miniflare';
import { prettyFactory } from 'pino-pretty';
import { PRETTY } from '../../shared/log-node.ts';
import { ConfigError, loadSettings } from '../../shared/config.ts';
import { REPO_ROOT } from './paths.ts';

const bindings: Record<string, string> = {};
for (const [k, v] of Object.entries(process.env)) if (k.startsWith('SVCD_') && v) bindings[k] = v;

try {
  const settings = loadSettings(bindings);
  const mf = new Miniflare({
    modules: true,
    scriptPath: join(REPO_ROOT, 'dist/worker.js'),
    compatibilityDate: '2025-09-01',
    bindings,
    host: settings.SVCD_HOST,
    port: settings.SVCD_PORT,
    // The handlers' JSON lines (shared/log.ts consoleLog) go to this process's stderr, readable on a
    // terminal (docs/observability.md "Logs"); stdout carries only the ready line.
    handleRuntimeStdio(stdout: Readable, stderr: Readable) {
      const readable = settings.SVCD_LOG_FORMAT === 'pretty' || (settings.SVCD_LOG_FORMAT === 'auto' && process.stderr.isTTY === true);
      const pretty = readable ? prettyFactory({ ...PRETTY, colorize: process.stderr.isTTY === true }) : null;
      for (const stream of [stdout, stderr]) {
        createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
          process.stderr.write(pretty && line.startsWith('{') ? pretty(line) : `${line}\n`);
        });
      }
    },
  });
  let leaving = false;
  const leave = () => {
    if (leaving) return;
    leaving = true;
    mf.dispose().then(() => process.exit(0), () => process.exit(1));
  };
  // Watched from before ready: a supervisor that dies during start-up takes this process with it.
  for (const event of ['end', 'close', 'error'] as const) process.stdin.on(event, leave);
  process.stdin.resume();
  const url = (await mf.ready).toString().replace(/\/$/, '');
  // miniflare's exit hooks call process.exit before workerd is gone; this process owns its
  // shutdown instead: dispose (which waits for workerd to exit), then leave.
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.removeAllListeners(signal);
    process.once(signal, leave);
  }
  if (!leaving) console.log(JSON.stringify({ ready: true, url }));
} catch (err) {
  console.error(`worker-host: ${err instanceof ConfigError ? err.message : (err as Error).message}`);
  process.exit(1);
}
