/**
 * How the CLI fails (docs/cli.md "Exit codes and errors"): 2 for a usage mistake, 1 for a refusal of
 * the service (its code printed, with the next step to take) or a local failure; with `--json` the
 * error is also printed on stdout as `{"error": {...}}`.
 */
import { SvcError, RealtimeOverflowError } from '../errors.ts';
import type { Output } from './output.ts';

/** A mistake in the command line: exit 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** A failure on this side (no profile, an expired session without a secret, a file): exit 1. */
export class CliError extends Error {
  readonly hint: string | undefined;

  constructor(message: string, hint?: string) {
    super(message);
    this.name = 'CliError';
    this.hint = hint;
  }
}

/** What the failing command was about, to name it in the next step. */
export interface FailureContext {
  project?: string;
  baseUrl?: string;
  /** The command used a project key (`/v2`, or a subscription with `SVC_KEY`). */
  usedKey?: boolean;
}

/** The next step after a service error, by its code. */
export function hintFor(err: SvcError, ctx: FailureContext): string | undefined {
  const p = ctx.project ?? 'PROJECT';
  switch (err.code) {
    case 'tenant_not_running':
      return `the project's engine is not running: run \`svc wakeup ${p}\``;
    case 'tenant_running':
      return `snapshots and restores need the engine stopped: run \`svc sleep ${p}\` first`;
    case 'authentication_required':
      return ctx.usedKey
        ? 'the project key was refused (revoked or mistyped): issue one with `svc keys create PROJECT`, or unset SVC_KEY'
        : 'your session is missing or expired: run `svc login` (or `svc signup`)';
    case 'authorization_denied':
      return ctx.usedKey ? 'the project key belongs to another project' : 'this deployment needs an invite code: pass `--invite-code`';
    case 'not_found':
      return ctx.project ? `check the names and ids (\`svc projects list\`, \`svc projects get ${p}\`)` : 'check the names and ids (`svc projects list`)';
    case 'orchestrator_unavailable':
      return 'the service cannot run tenants right now: see `svc health`, then retry';
    case 'upstream_unavailable':
      return `the project's engine or host did not answer: retry, or look at \`svc head ${p}\``;
    case 'payload_too_large':
      return 'the body is over the limit for this route (docs/interface.md "Limits")';
    case 'conflict':
      return 'the resource changed or is busy: read it again and retry';
    case 'function_busy':
      return `the function is at its concurrency limit: retry${err.retryAfter !== null ? ` after ${err.retryAfter} s` : ' shortly'}`;
    case 'function_timeout':
      return 'the function ran past its timeout: raise `--timeout-ms` at deploy, or make it faster';
    case 'function_bad_output':
      return 'the function threw or did not return a Response: see `svc functions logs`';
    case 'function_runtime_missing':
      return 'the host cannot run functions right now: retry later';
    case 'sql_error':
    case 'bad_request':
    case 'bad_query':
      return undefined;
    default:
      return undefined;
  }
}

/** Prints `err` and answers the exit code. */
export function report(err: unknown, out: Output, ctx: FailureContext): number {
  const e = out.ce;
  if (err instanceof UsageError) {
    out.note(`${e.red('error:')} ${err.message}\n(see \`svc --help\`)`);
    if (out.json) out.out.write(`${JSON.stringify({ error: { code: 'usage', message: err.message } })}\n`);
    return 2;
  }
  if (err instanceof SvcError) {
    const hint = hintFor(err, ctx);
    const id = err.requestId ? e.dim(` (request ${err.requestId})`) : '';
    out.note(`${e.red('error:')} ${e.bold(err.code)}: ${err.message}${id}`);
    if (hint) out.note(`${e.yellow('hint:')} ${hint}`);
    if (out.json) out.out.write(`${JSON.stringify({ error: { ...err.toJSON(), ...(hint ? { hint } : {}) } })}\n`);
    return 1;
  }
  const { message, hint, code } = describeLocal(err, ctx);
  out.note(`${e.red('error:')} ${message}`);
  if (hint) out.note(`${e.yellow('hint:')} ${hint}`);
  if (out.json) out.out.write(`${JSON.stringify({ error: { code, message, ...(hint ? { hint } : {}) } })}\n`);
  return 1;
}

function describeLocal(err: unknown, ctx: FailureContext): { message: string; hint?: string; code: string } {
  if (err instanceof CliError) return { message: err.message, ...(err.hint ? { hint: err.hint } : {}), code: 'cli' };
  if (err instanceof RealtimeOverflowError) return { message: err.message, hint: 'read faster, or subscribe to fewer channels', code: 'overflow' };
  if (err instanceof DOMException && err.name === 'TimeoutError') return { message: err.message, hint: 'retry, or raise SVC_TIMEOUT_MS', code: 'timeout' };
  if (err instanceof TypeError && /fetch failed/i.test(err.message)) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return {
      message: `could not reach ${ctx.baseUrl ?? 'the service'}: ${cause?.code ?? cause?.message ?? err.message}`,
      hint: 'is the service running? (`npm start` serves http://127.0.0.1:8787; SVC_BASE_URL or `svc login --base-url` choose another)',
      code: 'unreachable',
    };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { message, code: 'cli' };
}
