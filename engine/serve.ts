/**
 * `serve --data-dir D --listen 127.0.0.1:P [--max-body-bytes N] [--statement-timeout-ms N]`
 * (docs/engine.md "CLI"; docs/lifecycle.md "Starting an engine").
 *
 * Order matters: the directory lock first (nobody else may recover or change the database), then the
 * one connection, held by the executor process (./executor-link.ts, docs/engine.md "Statement time
 * limit"), then the listener, and only then the ready line. SIGTERM/SIGINT: stop accepting, let
 * in-flight requests finish (bounded), checkpoint the WAL into the file, release the lock, exit 0.
 * A second signal skips the wait for in-flight requests.
 */
import type { ChildProcess } from 'node:child_process';
import type { Server } from 'node:http';
import { writeSync } from 'node:fs';
import { checkpointTruncate, openDatabase } from './database.ts';
import { EngineCliError } from './exit-codes.ts';
import { ExecutorLink } from './executor-link.ts';
import { createEngineHttp } from './http-server.ts';
import { requireInitialized } from './layout.ts';
import { acquireDirectoryLock } from './lock.ts';

/** What `serve` needs, already parsed. */
export interface ServeOptions {
  dataDir: string;
  host: string;
  port: number;
  maxBodyBytes: number;
  /** The longest a request's statements may run before they are interrupted. */
  statementTimeoutMs: number;
  /** Bound on waiting for in-flight requests at shutdown. */
  drainMs: number;
  /** The first executor, spawned before serve's modules loaded (./executor-spawn.ts); it waits to be told to open. */
  executor?: ChildProcess;
}

function logError(message: string): void {
  process.stderr.write(`svc-engine: ${message}\n`);
}

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolveListen, rejectListen) => {
    const onError = (err: NodeJS.ErrnoException) => {
      rejectListen(new EngineCliError('internal', `cannot listen on ${host}:${port}: ${err.code ?? err.message}`, { cause: err }));
    };
    server.once('error', onError);
    server.listen({ host, port, exclusive: true }, () => {
      server.off('error', onError);
      const address = server.address();
      resolveListen(typeof address === 'object' && address !== null ? address.port : port);
    });
  });
}

/** Runs the engine until a stop signal; resolves with the exit code (0 after a clean stop). */
export async function serveCommand(options: ServeOptions): Promise<number> {
  // The first signal asks for a clean stop; a second one stops waiting for in-flight requests.
  const stop: { signal: NodeJS.Signals | null; requested: () => void; force: () => void } = {
    signal: null,
    requested: () => {},
    force: () => {},
  };
  const stopRequested = new Promise<void>((resolveStop) => {
    stop.requested = resolveStop;
  });
  const onSignal = (signal: NodeJS.Signals) => {
    if (stop.signal !== null) return stop.force();
    stop.signal = signal;
    stop.requested();
  };
  // Installed before anything else, so a SIGTERM during start-up still ends in a clean stop.
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  let paths;
  let lock;
  try {
    ({ paths } = requireInitialized(options.dataDir));
    lock = acquireDirectoryLock(paths.dir, 'serve');
  } catch (err) {
    options.executor?.kill('SIGKILL');
    throw err;
  }
  // No executor can be started any more (the data directory went bad under it): stop, loudly.
  let fatal: Error | null = null;
  const executor = new ExecutorLink({
    dataDir: paths.dir,
    timeoutMs: options.statementTimeoutMs,
    logError,
    onFatal: (err) => {
      logError(`no executor can be started: ${err.message}`);
      fatal = err;
      onSignal('SIGTERM');
    },
  });
  let http;
  let port: number;
  try {
    await executor.start(options.executor);
    http = createEngineHttp(executor, { maxBodyBytes: options.maxBodyBytes, statementTimeoutMs: options.statementTimeoutMs, drainMs: options.drainMs, logError });
    http.server.on('error', (err) => logError(`listener error: ${err.message}`));
    port = await listen(http.server, options.host, options.port);
  } catch (err) {
    await executor.close(0);
    lock.release();
    throw err;
  }

  if (stop.signal === null) {
    const host = options.host.includes(':') ? `[${options.host}]` : options.host;
    const ready = { ready: true, listen: `${host}:${port}`, pid: process.pid, data_dir: paths.dir };
    writeSync(1, `${JSON.stringify(ready)}\n`);
  }

  await stopRequested;
  const server = http.server;
  let forced = false;
  stop.force = () => {
    forced = true;
    server.closeAllConnections();
  };
  const drainUntil = Date.now() + options.drainMs;
  await http.shutdown();
  // The executor checkpoints and closes; one that had to be killed (a request still running past the
  // drain, or a second signal) leaves the checkpoint to this process, which holds the lock.
  if (!(await executor.close(forced ? 0 : Math.max(0, drainUntil - Date.now())))) {
    const db = openDatabase(paths.db);
    try {
      checkpointTruncate(db);
    } finally {
      db.close();
    }
  }
  lock.release();
  // Nothing more goes to stdout after the ready line: the reason is on stderr already.
  if (fatal !== null) return 1;
  logError(`stopped on ${String(stop.signal)}; database checkpointed, lock released`);
  return 0;
}
