/**
 * `serve --data-dir D --listen 127.0.0.1:P [--max-body-bytes N]` (docs/engine.md "CLI"; docs/lifecycle.md "Starting an engine").
 *
 * Order matters: the directory lock first (nobody else may recover or change the database), then the
 * one connection, then the listener, and only then the ready line. SIGTERM/SIGINT: stop accepting,
 * let in-flight requests finish (bounded), checkpoint the WAL into the file, release the lock, exit 0.
 * A second signal skips the wait for in-flight requests.
 */
import type { Server } from 'node:http';
import { writeSync } from 'node:fs';
import { openDatabase } from './database.ts';
import { EngineCliError } from './exit-codes.ts';
import { Executor } from './executor.ts';
import { createEngineHttp } from './http-server.ts';
import { requireInitialized } from './layout.ts';
import { acquireDirectoryLock } from './lock.ts';

/** What `serve` needs, already parsed. */
export interface ServeOptions {
  dataDir: string;
  host: string;
  port: number;
  maxBodyBytes: number;
  /** Bound on waiting for in-flight requests at shutdown. */
  drainMs: number;
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

  const { paths, meta } = requireInitialized(options.dataDir);
  const lock = acquireDirectoryLock(paths.dir, 'serve');
  let executor: Executor | null = null;
  let http;
  let port: number;
  try {
    const db = openDatabase(paths.db, { serving: true });
    try {
      executor = new Executor(db);
    } catch (err) {
      db.close();
      throw err;
    }
    if (executor.lineage.directory_lineage !== meta.directory_lineage) {
      throw new EngineCliError('internal', `${paths.dir} is damaged: meta.json and the database name different lineages`);
    }
    http = createEngineHttp(executor, { maxBodyBytes: options.maxBodyBytes, drainMs: options.drainMs, logError });
    http.server.on('error', (err) => logError(`listener error: ${err.message}`));
    port = await listen(http.server, options.host, options.port);
  } catch (err) {
    executor?.close();
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
  stop.force = () => server.closeAllConnections();
  await http.shutdown();
  executor.close();
  lock.release();
  logError(`stopped on ${String(stop.signal)}; database checkpointed, lock released`);
  return 0;
}
