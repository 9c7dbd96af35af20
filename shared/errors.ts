/**
 * The one error type of the service, the one table that maps each error code to its HTTP status
 * (the interface contract, "Errors"; docs/api.md "Errors"), and the one renderer every listener
 * answers errors with, as a web Response (`errorResponse`) or on a node:http response
 * (`writeError`). Status, headers and body always come from `renderError`, so they cannot disagree.
 */
import type { ServerResponse } from 'node:http';
import type { Log } from './log.ts';
import { smallAnswerEncoding } from './http/encoding.ts';

// The table itself lives in ./error-codes.ts, which imports nothing, so the SDK (client/) shares it
// without the renderer's node:http types.
import { ERROR_STATUS, type ErrorCode } from './error-codes.ts';

export { ERROR_STATUS, isErrorCode, type ErrorCode } from './error-codes.ts';

/**
 * The documented cases where a code is answered with another status than its row of ERROR_STATUS, because
 * HTTP gives that case a status of its own (docs/api.md "Errors"). The code and envelope stay the
 * contract's; the contract's list of codes is closed, so a case is never a new code.
 */
export const STATUS_VARIANTS = {
  /** A `Range` no byte of the object satisfies (RFC 9110 §15.5.17); its `Content-Range` names the size. */
  range_not_satisfiable: { code: 'invalid_request', status: 416 },
} as const satisfies Record<string, { code: ErrorCode; status: number }>;

/** One of the documented status variants. */
export type StatusVariant = keyof typeof STATUS_VARIANTS;

/** The status of `code`, or of its documented `variant`. */
export function statusOf(code: ErrorCode, variant?: StatusVariant): number {
  if (variant === undefined) return ERROR_STATUS[code];
  const row = STATUS_VARIANTS[variant];
  if (row.code !== code) throw new Error(`status variant ${variant} belongs to ${row.code}, not ${code}`);
  return row.status;
}

/** The `WWW-Authenticate` challenge every 401 carries (contract "Authentication" 4). */
export const WWW_AUTHENTICATE = 'Bearer realm="svc-cloud"';

/** A failure the client is told about: a contract error code and a short message naming the problem. */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Headers the answer carries beside the renderer's own (a 416's `Content-Range`). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ErrorCode, message: string, options: { variant?: StatusVariant; headers?: Record<string, string> } = {}) {
    super(message);
    this.name = 'ServiceError';
    this.code = code;
    this.status = statusOf(code, options.variant);
    this.headers = options.headers ?? {};
  }
}

/** The error envelope `{"error":{"code","message"}}`. */
export interface ErrorEnvelope {
  error: { code: ErrorCode; message: string };
}

/** Builds the envelope of an error. */
export function envelopeOf(err: ServiceError): ErrorEnvelope {
  return { error: { code: err.code, message: err.message } };
}

/** An error answer as plain parts, ready for either HTTP surface. */
export interface RenderedError {
  status: number;
  /** Lowercase names; always `content-type`, `content-length`, `x-request-id`, and the challenge on 401. */
  headers: Record<string, string>;
  body: Uint8Array<ArrayBuffer>;
}

/**
 * The answer to any thrown value. A ServiceError keeps its code, message, status and headers;
 * anything else becomes 500 `internal` whose message holds only the request id (the cause goes to
 * `log`). The length is declared so that an answer given before a request body was read is
 * complete as soon as its bytes are out, even while the body is still being drained
 * (shared/http/linger.ts).
 */
export function renderError(thrown: unknown, requestId: string, log: Log = (line) => console.error(line)): RenderedError {
  let err: ServiceError;
  if (thrown instanceof ServiceError) {
    err = thrown;
  } else {
    // The cause and its stack go to the server's log only (docs/observability.md "Logs").
    log(`request ${requestId} failed: ${thrown instanceof Error ? thrown.message : String(thrown)}`, {
      level: 'error',
      event: 'internal_error',
      request_id: requestId,
      err: thrown,
    });
    err = new ServiceError('internal', `internal error (request ${requestId})`);
  }
  const body = new TextEncoder().encode(JSON.stringify(envelopeOf(err)));
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(err.headers)) headers[name.toLowerCase()] = value;
  headers['content-type'] = 'application/json; charset=utf-8';
  headers['content-length'] = String(body.byteLength);
  headers['x-request-id'] = requestId;
  if (err.code === 'authentication_required') headers['www-authenticate'] = WWW_AUTHENTICATE;
  return { status: err.status, headers, body };
}

/** The code the answer to `thrown` carries (`renderError`): a ServiceError's own, else `internal`. */
export function errorCodeOf(thrown: unknown): string {
  return thrown instanceof ServiceError ? thrown.code : 'internal';
}

/** The error code answered on each node:http response that got one, for its request's log line. */
const ANSWERED_CODES = new WeakMap<object, string>();

/** The error code answered on `res` by `writeError` or shared/http/node-http.ts `answerError`, if any. */
export function answeredErrorCode(res: object): string | undefined {
  return ANSWERED_CODES.get(res);
}

/** Records that `res` answers the error `thrown` (`answeredErrorCode`). */
export function noteErrorAnswered(res: object, thrown: unknown): void {
  ANSWERED_CODES.set(res, errorCodeOf(thrown));
}

/** Renders any thrown value as an error Response (`renderError`). */
export function errorResponse(thrown: unknown, requestId: string, log?: Log): Response {
  const { status, headers, body } = renderError(thrown, requestId, log);
  // Not compressed by an edge: the envelope is small (shared/http/encoding.ts).
  return new Response(body, { status, headers: { ...headers, ...smallAnswerEncoding(body.byteLength) } });
}

/**
 * Writes any thrown value as the error answer on a node:http response whose head is not out yet
 * (`renderError`). Connection handling (closing after a refused body) is the listener's:
 * shared/http/node-http.ts `answerError` does both.
 */
export function writeError(res: ServerResponse, thrown: unknown, requestId: string, log?: Log): void {
  const { status, headers, body } = renderError(thrown, requestId, log);
  noteErrorAnswered(res, thrown);
  res.writeHead(status, headers);
  res.end(body);
}

/** Shorthands for the errors raised most often. */
export const errors = {
  invalid: (message: string) => new ServiceError('invalid_request', message),
  unauthenticated: (message = 'a valid bearer credential is required') =>
    new ServiceError('authentication_required', message),
  denied: (message: string) => new ServiceError('authorization_denied', message),
  notFound: (message = 'not found') => new ServiceError('not_found', message),
  conflict: (message: string) => new ServiceError('conflict', message),
  tooLarge: (message: string) => new ServiceError('payload_too_large', message),
  upstream: (message: string) => new ServiceError('upstream_unavailable', message),
  orchestrator: (message: string) => new ServiceError('orchestrator_unavailable', message),
  /** 416 (`invalid_request`): no byte of an object of `size` bytes is in the asked range. */
  rangeNotSatisfiable: (size: number, headers: Record<string, string> = {}) =>
    new ServiceError('invalid_request', `range not satisfiable: the object has ${size} bytes`, {
      variant: 'range_not_satisfiable',
      headers: { ...headers, 'content-range': `bytes */${size}` },
    }),
} as const;
