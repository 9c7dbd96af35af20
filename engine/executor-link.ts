/**
 * `serve`'s side of its executor process (./executor-main.ts; docs/engine.md "Statement time limit"):
 * requests go to the executor in arrival order and it runs them one at a time; each may run at most
 * the statement time limit, counted from the moment the executor takes it up (the answer to the one
 * before it). Past it the executor is SIGKILLed, the request answers `statement_timeout`, and a fresh
 * executor takes the requests that were waiting: the runaway statement stops using CPU at once, the
 * tenant's other requests wait only for the new executor to open the database, and SQLite rolls back
 * whatever the killed one had not committed (WAL: a transaction without its commit frame never
 * happened).
 *
 * Up to PIPELINE requests are handed over ahead, so the executor never waits for the next one. An
 * executor runs them strictly in order, so when it dies only the first unanswered one can have been
 * running; the ones behind it never started and are handed to the next executor unchanged.
 *
 * The one moment a kill could leave an outcome open is a commit in progress: the executor says
 * "committing" before SQLite starts one, a request in that state is never killed for its time (a
 * commit is short), and should the executor die then anyway, the answer says the outcome is unknown.
 * An executor that dies on its own (out of memory) answers its request `statement_aborted` and is
 * replaced the same way.
 */
import type { ChildProcess } from 'node:child_process';
import { spawnExecutor } from './executor-spawn.ts';
import { EXIT_CODES, EngineCliError, type FailureClass } from './exit-codes.ts';
import { FRAME, FrameReader, encodeFrame, readAnswerPayload, requestPayload, type Frame } from './frames.ts';
import { errorJson, type Answer, type RequestKind } from './requests.ts';

const FRAME_OF: Record<RequestKind, typeof FRAME.sql | typeof FRAME.search | typeof FRAME.drop> = { sql: FRAME.sql, search: FRAME.search, drop: FRAME.drop };
/** Requests handed to the executor ahead of its answers. */
const PIPELINE = 16;
/** How long a closing executor may take to checkpoint and exit before it is killed. */
const CLOSE_WAIT_MS = 10_000;
const STOPPING: Answer = { status: 503, json: errorJson('shutting_down', 'the engine is stopping') };

/** Settings of the link. */
export interface ExecutorLinkOptions {
  dataDir: string;
  /** The statement time limit of one request, in milliseconds. */
  timeoutMs: number;
  logError: (message: string) => void;
  /** Called when no executor can be started any more: `serve` cannot go on. */
  onFatal: (err: Error) => void;
}

interface Pending {
  seq: number;
  kind: RequestKind;
  requestId: string;
  payload: Buffer;
  resolve: (answer: Answer) => void;
  /** The executor said it is committing this request's write. */
  committing: boolean;
  /** The executor was killed because this request ran past the limit. */
  timedOut: boolean;
  timer: NodeJS.Timeout | null;
}

/** One executor process as the link sees it. */
interface Running {
  child: ChildProcess;
  /** Resolves once the process exited and its stdout was read to the end. */
  closed: Promise<void>;
  ready: boolean;
  /** Requests handed to it, oldest first; the first one is running (or about to). */
  inflight: Pending[];
  /** It was killed by this link (for a request's time, or at close). */
  killed: boolean;
}

/** The executor of one `serve`. */
export class ExecutorLink {
  readonly #options: ExecutorLinkOptions;
  /** Requests not handed to an executor yet, oldest first. */
  readonly #queue: Pending[] = [];
  #running: Running | null = null;
  #closing = false;
  /** Set once the first executor was ready: only then is a lost executor replaced. */
  #started = false;
  #seq = 0;
  #sqliteVersion = '';
  #idle: (() => void) | null = null;

  constructor(options: ExecutorLinkOptions) {
    this.#options = options;
  }

  /** SQLite's version, as the executor reported it. */
  get sqliteVersion(): string {
    return this.#sqliteVersion;
  }

  /**
   * Starts the first executor (`first`: one spawned early, ./executor-spawn.ts) once the caller holds
   * the directory lock; rejects with the engine's error when it cannot open the data directory.
   */
  async start(first?: ChildProcess): Promise<void> {
    await this.#spawn(first);
    this.#started = true;
  }

  /** Runs one request; never rejects (a failure is an answer). */
  run(kind: RequestKind, requestId: string, payload: Buffer): Promise<Answer> {
    if (this.#closing) return Promise.resolve(STOPPING);
    return new Promise<Answer>((resolve) => {
      this.#seq = (this.#seq + 1) >>> 0;
      this.#queue.push({ seq: this.#seq, kind, requestId, payload, resolve, committing: false, timedOut: false, timer: null });
      this.#pump();
    });
  }

  /**
   * Stops the executor: requests already handed over are given until `graceMs` to finish (those not
   * handed over answer `shutting_down`), then the executor checkpoints and exits, or is killed.
   * Answers whether it closed the database itself (false: the caller checkpoints).
   */
  async close(graceMs: number): Promise<boolean> {
    this.#closing = true;
    for (const pending of this.#queue.splice(0)) pending.resolve(STOPPING);
    const running = this.#running;
    if (running === null) return false;
    if (running.inflight.length > 0) {
      const idle = new Promise<void>((resolve) => (this.#idle = resolve));
      await Promise.race([idle, running.closed, delay(graceMs)]);
      this.#idle = null;
    }
    if (running.inflight.length === 0 && this.#running === running && running.ready) {
      running.child.stdin!.write(encodeFrame(FRAME.close, 0));
      if (await Promise.race([running.closed.then(() => true), delay(CLOSE_WAIT_MS).then(() => false)])) {
        return running.child.exitCode === 0;
      }
    }
    running.killed = true;
    running.child.kill('SIGKILL');
    await running.closed;
    return false;
  }

  /** Hands waiting requests to a ready executor, up to PIPELINE ahead of its answers. */
  #pump(): void {
    const running = this.#running;
    if (running === null || !running.ready) return;
    while (running.inflight.length < PIPELINE) {
      const next = this.#queue.shift();
      if (next === undefined) break;
      running.inflight.push(next);
      running.child.stdin!.write(encodeFrame(FRAME_OF[next.kind], next.seq, requestPayload(next.requestId, next.payload)));
      if (running.inflight.length === 1) this.#arm(running, next);
    }
  }

  /** The request the executor takes up now: its time starts. */
  #arm(running: Running, pending: Pending): void {
    pending.timer = setTimeout(() => this.#expire(running, pending), this.#options.timeoutMs);
  }

  /**
   * The request ran out of time. Judged after the I/O already waiting is read (a "committing" or an
   * answer may be in the pipe), then the executor is killed unless it is committing.
   */
  #expire(running: Running, pending: Pending): void {
    setImmediate(() => {
      if (this.#running !== running || running.inflight[0] !== pending || pending.committing || running.killed) return;
      pending.timedOut = true;
      running.killed = true;
      this.#options.logError(`${pending.requestId}: the request ran past the statement time limit (${this.#options.timeoutMs} ms); its executor is killed`);
      running.child.kill('SIGKILL');
    });
  }

  #onFrame(running: Running, frame: Frame): void {
    if (frame.type === FRAME.ready) {
      this.#sqliteVersion = String((JSON.parse(frame.payload.toString('utf8')) as { sqlite_version?: unknown }).sqlite_version ?? '');
      running.ready = true;
      this.#pump();
      return;
    }
    const head = running.inflight[0];
    if (head === undefined || frame.seq !== head.seq) {
      this.#options.logError(`the executor answered request ${frame.seq} out of turn; ignored`);
      return;
    }
    if (frame.type === FRAME.committing) {
      head.committing = true;
    } else if (frame.type === FRAME.answer) {
      running.inflight.shift();
      this.#finish(head, readAnswerPayload(frame.payload));
      const next = running.inflight[0];
      if (next !== undefined) this.#arm(running, next);
      else this.#idle?.();
      if (this.#running === running) this.#pump();
    }
  }

  #finish(pending: Pending, answer: Answer): void {
    if (pending.timer) clearTimeout(pending.timer);
    pending.timer = null;
    pending.payload = Buffer.alloc(0);
    pending.resolve(answer);
  }

  /** Tells an executor (a fresh one unless given) to open the database, and waits until it has; rejects with its failure. */
  #spawn(given?: ChildProcess): Promise<void> {
    const child = given ?? spawnExecutor(this.#options.dataDir);
    const reader = new FrameReader();
    let failure: EngineCliError | null = null;
    let resolveReady!: () => void;
    let rejectReady!: (err: Error) => void;
    const ready = new Promise<void>((resolve, reject) => {
      resolveReady = resolve;
      rejectReady = reject;
    });
    const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
    const running: Running = { child, closed, ready: false, inflight: [], killed: false };
    this.#running = running;
    child.once('error', (err) => rejectReady(new EngineCliError('internal', `cannot start the executor: ${err.message}`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      let frames: Frame[];
      try {
        frames = reader.push(chunk);
      } catch (err) {
        this.#options.logError(`executor output is not frames (${(err as Error).message}); it is killed`);
        running.killed = true;
        child.kill('SIGKILL');
        return;
      }
      for (const frame of frames) {
        if (frame.type === FRAME.failed) {
          const { code, message } = JSON.parse(frame.payload.toString('utf8')) as { code: string; message: string };
          failure = new EngineCliError(isCliCode(code) ? code : 'internal', message);
        } else {
          if (frame.type === FRAME.ready) resolveReady();
          this.#onFrame(running, frame);
        }
      }
    });
    child.stdin!.write(encodeFrame(FRAME.open, 0));
    void closed.then(() => {
      rejectReady(failure ?? new EngineCliError('internal', `the executor exited before it was ready (${child.signalCode ?? `exit code ${child.exitCode}`})`));
      this.#onClosed(running);
    });
    return ready;
  }

  /**
   * An executor is gone, every frame it wrote read. The request it was running is answered; the
   * ones behind it never started and go back to the front of the queue for a fresh executor.
   */
  #onClosed(running: Running): void {
    if (this.#running !== running) return;
    this.#running = null;
    const [head, ...behind] = running.inflight;
    running.inflight = [];
    if (head !== undefined) {
      if (head.timer) clearTimeout(head.timer);
      head.timer = null;
      if (head.committing) {
        this.#finish(head, {
          status: 500,
          json: errorJson('statement_aborted', 'the request was interrupted while it committed: whether it was applied is unknown; read the data to find out'),
        });
      } else if (head.timedOut) {
        this.#finish(head, {
          status: 400,
          json: errorJson('statement_timeout', `the request ran longer than the statement time limit of ${this.#options.timeoutMs} ms and was interrupted; nothing it did was committed`),
        });
      } else if (running.killed) {
        // Killed for an earlier request's time just as it began: rolled back, it can simply run again.
        behind.unshift(head);
      } else {
        const how = running.child.signalCode ?? `exit code ${running.child.exitCode}`;
        this.#options.logError(`${head.requestId}: the executor ended while running the request (${how})`);
        this.#finish(head, { status: 500, json: errorJson('statement_aborted', 'the engine process running the request ended (out of memory?); nothing it did was committed') });
      }
    }
    this.#queue.unshift(...behind);
    if (this.#closing) {
      for (const pending of this.#queue.splice(0)) pending.resolve(STOPPING);
      this.#idle?.();
      return;
    }
    if (!this.#started) return;
    this.#spawn().then(
      () => this.#pump(),
      (err: Error) => {
        this.#closing = true;
        for (const pending of this.#queue.splice(0)) pending.resolve({ status: 500, json: errorJson('internal', `internal error (request ${pending.requestId})`) });
        this.#options.onFatal(err);
      },
    );
  }
}

function isCliCode(code: string): code is FailureClass {
  return code !== 'ok' && Object.hasOwn(EXIT_CODES, code);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
