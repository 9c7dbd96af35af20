/**
 * The executor process of `serve` (docs/engine.md "Statement time limit"): it holds the data
 * directory's one SQLite connection and runs the `/v2` requests that touch it, one at a time, as
 * `serve` hands them over on stdin; it answers on stdout (./frames.ts). It is a process of its own so
 * that `serve` can end a statement that runs past the time limit (SIGKILL: SQLite rolls back whatever
 * was not committed) and start a fresh executor, while the listener, the lock and every other request
 * stay where they are. node:sqlite offers no progress handler and no interrupt, and a worker thread
 * cannot be stopped inside a SQLite call, so a process is the unit that can be ended.
 *
 *   executor-main.ts <data dir>
 *
 * It boots at once but opens the database only when `serve`, holding the directory lock, says so.
 * It never prints anything else on stdout, ignores SIGINT and SIGTERM (`serve` decides when it
 * stops), and exits once `serve` asks it to (after a checkpoint) or is gone (its stdin ends).
 */
import { writeFileSync } from 'node:fs';
import { openDatabase } from './database.ts';
import { EngineCliError } from './exit-codes.ts';
import { Executor } from './executor.ts';
import { FRAME, FrameReader, answerPayload, encodeFrame, readRequestPayload, type FrameType } from './frames.ts';
import { requireInitialized } from './layout.ts';
import { handleRequest, type RequestKind } from './requests.ts';

const KINDS: Record<number, RequestKind> = { [FRAME.sql]: 'sql', [FRAME.search]: 'search', [FRAME.drop]: 'drop' };

function send(type: FrameType, seq: number, payload?: Buffer | string): void {
  // stdout is a pipe: synchronous on Linux, so a frame is out before the next statement runs.
  process.stdout.write(encodeFrame(type, seq, payload));
}

function logError(message: string): void {
  process.stderr.write(`svc-engine executor: ${message}\n`);
}

process.on('SIGINT', () => {});
process.on('SIGTERM', () => {});
// Should the engine's memory run out, the kernel picks this process (the one that runs the statement),
// not `serve`, which answers the request and starts another executor. Raising one's own score needs
// no privilege.
try {
  writeFileSync('/proc/self/oom_score_adj', '500');
} catch {
  // not Linux: the answer is the same, only the choice of victim is the kernel's
}

const dataDir = process.argv[2];
let executor: Executor | null = null;
let current = 0;

/** Opens the database (once `serve` holds the lock); on failure says why and exits. */
function open(): void {
  try {
    if (!dataDir) throw new EngineCliError('bad_arguments', 'executor: no data directory given');
    const { paths, meta } = requireInitialized(dataDir);
    const db = openDatabase(paths.db, { serving: true });
    let opened: Executor;
    try {
      opened = new Executor(db, { beforeCommit: () => send(FRAME.committing, current) });
    } catch (err) {
      db.close();
      throw err;
    }
    if (opened.lineage.directory_lineage !== meta.directory_lineage) {
      opened.close();
      throw new EngineCliError('internal', `${paths.dir} is damaged: meta.json and the database name different lineages`);
    }
    executor = opened;
  } catch (err) {
    const code = err instanceof EngineCliError ? err.code : 'internal';
    send(FRAME.failed, 0, JSON.stringify({ code, message: err instanceof Error ? err.message : String(err) }));
    process.exit(1);
  }
  send(FRAME.ready, 0, JSON.stringify({ sqlite_version: executor.sqliteVersion }));
}

/** Checkpoints, closes and exits (a database never opened: just exits). */
function close(): never {
  try {
    executor?.close();
  } catch (err) {
    logError(`closing the database failed: ${(err as Error).message}`);
    process.exit(1);
  }
  process.exit(0);
}

const reader = new FrameReader();
process.stdin.on('data', (chunk: Buffer) => {
  for (const frame of reader.push(chunk)) {
    if (frame.type === FRAME.open) {
      if (executor === null) open();
      continue;
    }
    if (frame.type === FRAME.close) close();
    const kind = KINDS[frame.type];
    if (kind === undefined || executor === null) {
      logError(`unexpected frame type ${frame.type}`);
      continue;
    }
    current = frame.seq;
    const { requestId, body } = readRequestPayload(frame.payload);
    const answer = handleRequest(executor, kind, body, requestId, logError);
    send(FRAME.answer, frame.seq, answerPayload(answer.status, answer.json));
  }
});
// `serve` is gone (killed): nothing will ask anything any more.
process.stdin.on('end', close);
