/**
 * One invocation in its project's runtime (docs/functions.md "Invoke", "Timeouts"): the client's
 * request streamed to the function's isolate and its answer streamed back, cut at the function's
 * timeout; a runtime stuck in the function's code is killed before the 504. Also the outcome an
 * invocation is counted under (docs/observability.md "Metrics") and how a runtime's end is told.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FunctionRecord } from '../../shared/db/functions.ts';
import { ServiceError } from '../../shared/errors.ts';
import { forward, UpstreamError } from '../../shared/http/forward.ts';
import { FUNCTION_HEADERS } from '../../shared/schemas/functions.ts';
import type { FunctionOutcome } from '../metrics.ts';
import type { FunctionLogStore } from './logs.ts';
import type { ProjectRuntime, RuntimeExit } from './project-runtime.ts';

/** Seconds a client told `function_busy` is asked to wait (`Retry-After`). */
export const BUSY_RETRY_AFTER_SECONDS = 1;
/** How long a runtime has to answer its ping after an invocation ran past its timeout, before it is killed. */
const STUCK_PING_MS = 250;

/** An invocation as the internal route hands it over: the client's request, streamed on to the runtime. */
export interface InvocationInput {
  projectId: string;
  name: string;
  /** The client's method exactly, also for a GET or HEAD that carried a body. */
  method: string;
  /** What follows `/invoke` in the path (raw, starting with `/`), and the query with its `?`. */
  path: string;
  /** Exactly the headers the function sees, flat name/value pairs (host-agent/routes/functions.ts). */
  headers: string[];
  /** Whether the client sent a body, whatever the method. */
  hasBody: boolean;
  /** The client's declared `Content-Length`, or null. */
  length: number | null;
  origin: string;
  requestId: string;
  /**
   * Set when the answer goes to the client itself (./public.ts), not back over the handlers' hop:
   * the function's `Content-Encoding` and a HEAD's `Content-Length` keep their own names, and these
   * headers (the service's request id, CORS) are added, replacing the function's own of those names.
   */
  direct?: { headers: string[] };
}

/** What running an invocation needs besides the runtime: the function logs, and how a stuck runtime is killed. */
export interface InvocationDeps {
  logs: FunctionLogStore;
  kill(runtime: ProjectRuntime): Promise<void>;
}

/** Runs the invocation on `target` of `runtime`; answers its outcome, or throws a ServiceError before any answer. */
export async function runInvocation(
  deps: InvocationDeps,
  runtime: ProjectRuntime,
  target: string,
  head: FunctionRecord,
  req: IncomingMessage,
  res: ServerResponse,
  input: InvocationInput,
): Promise<FunctionOutcome> {
  let timedOut = false;
  const cut = new AbortController();
  // Past the deadline the invocation is cut; a runtime whose thread does not answer a ping is stuck
  // in the function's code and is killed before the 504 is answered, so the client's next
  // invocation finds a fresh one (docs/functions.md "Timeouts").
  let settled: Promise<void> = Promise.resolve();
  const timer = setTimeout(() => {
    timedOut = true;
    cut.abort();
    settled = runtime.ping(STUCK_PING_MS).then(async (answers) => {
      deps.logs.append(head.project, head.name, head.version, 'agent', [
        `invocation ${input.requestId} ran past its timeout of ${head.timeout_ms} ms${answers ? '' : `: its runtime (pid ${runtime.pid}) was stuck and is killed`}`,
      ]);
      if (!answers) await deps.kill(runtime);
    });
  }, head.timeout_ms);
  const answer = answerHeaders(input);
  try {
    // The client's headers, and two marks the function's isolate reads and removes (./supervisor.js):
    // whether the client sent a body, and the Content-Length it declared (RFC 9110 §8.6), which
    // also frames this hop. Their names are of the service's own (x-svc-fn-), which no client
    // header ever carries this far (host-agent/routes/functions.ts).
    const headers = [...input.headers, 'x-svc-fn-rt-body', input.hasBody ? '1' : '0'];
    if (input.length !== null) headers.push('content-length', String(input.length), 'x-svc-fn-rt-length', String(input.length));
    await forward(runtime.pool, req, res, {
      method: input.method,
      path: `/${target}${input.path}`,
      headers,
      body: input.hasBody ? req : null,
      signal: cut.signal,
      answerHeaders: (_status, flat) => answer.of(flat),
    });
    if (timedOut) {
      await settled;
      return 'timeout';
    }
    return answer.failed === null ? 'ok' : 'bad_output';
  } catch (err) {
    if (!(err instanceof UpstreamError)) throw err;
    if (timedOut) await settled;
    if (timedOut) throw new ServiceError('function_timeout', `function ${head.name} did not answer within its timeout of ${head.timeout_ms} ms`);
    const exit = await exitWithin(runtime, 200);
    if (exit === null) throw new ServiceError('function_bad_output', `the runtime of function ${head.name} failed before answering`);
    deps.logs.append(head.project, head.name, head.version, 'agent', [`its runtime (pid ${runtime.pid}) ended during invocation ${input.requestId}: ${describeExit(exit, head.memory_mb)}`]);
    throw new ServiceError('function_bad_output', `function ${head.name} ended before answering: ${describeExit(exit, head.memory_mb)}`);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The headers of the function's answer as they leave the agent, and the runtime's mark of a
 * function that answered no Response (`x-svc-rt-failed`, ./supervisor.js) once they have been read.
 */
function answerHeaders(input: InvocationInput): { of(flat: string[]): string[]; failed: string | null } {
  const isHead = input.method === 'HEAD';
  const direct = input.direct;
  const replaced = direct ? new Set(direct.headers.filter((_, i) => i % 2 === 0)) : null;
  const answer = {
    failed: null as string | null,
    of(flat: string[]): string[] {
      const out: string[] = [];
      for (let i = 0; i < flat.length; i += 2) {
        const name = flat[i]!.toLowerCase();
        if (name === 'x-svc-rt-failed') {
          answer.failed = flat[i + 1]!;
          continue;
        }
        if (direct) {
          if (replaced!.has(name)) continue;
          out.push(name === FUNCTION_HEADERS.contentEncoding ? 'content-encoding' : flat[i]!, flat[i + 1]!);
          continue;
        }
        // A HEAD crossed the handlers' hop as a GET: its length travels renamed, with an empty body.
        if (isHead && name === 'content-length') {
          out.push(FUNCTION_HEADERS.contentLength, flat[i + 1]!);
          continue;
        }
        out.push(flat[i]!, flat[i + 1]!);
      }
      if (direct) out.push(...direct.headers);
      else if (isHead) out.push('content-length', '0');
      return out;
    },
  };
  return answer;
}

/** How `runtime` ended, if it does within `ms`; else null. */
export function exitWithin(runtime: ProjectRuntime, ms: number): Promise<RuntimeExit | null> {
  return Promise.race([runtime.exited, new Promise<null>((r) => setTimeout(() => r(null), ms))]);
}

/** How a runtime ended, in words: past its memory, killed, or its exit status. */
export function describeExit(exit: RuntimeExit, memoryMb: number): string {
  if (exit.heapLimit || exit.oomKilled) return `it passed its memory limit of ${memoryMb} MiB (memory_mb)`;
  return exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code}`;
}

/** The metrics outcome of an invocation that threw. */
export function outcomeOf(err: unknown): FunctionOutcome {
  if (!(err instanceof ServiceError)) return 'error';
  switch (err.code) {
    case 'function_busy':
      return 'busy';
    case 'function_timeout':
      return 'timeout';
    case 'function_bad_output':
      return 'bad_output';
    case 'function_runtime_missing':
      return 'runtime_missing';
    default:
      return 'error';
  }
}

/** 429 `function_busy` with `Retry-After`. */
export function busy(message: string): ServiceError {
  return new ServiceError('function_busy', message, { headers: { 'retry-after': String(BUSY_RETRY_AFTER_SECONDS) } });
}
