/**
 * The one error type of the service and the table that maps each error code to its HTTP status
 * (contract "Errors"; DESIGN §3 Errors). Status and body always come from this table, so they
 * cannot disagree.
 */

/** Every error code the contract allows, with the status DESIGN §3 gives it. */
export const ERROR_STATUS = {
  invalid_request: 400,
  authentication_required: 401,
  authorization_denied: 403,
  not_found: 404,
  conflict: 409,
  tenant_not_running: 409,
  tenant_running: 409,
  payload_too_large: 413,
  function_busy: 429,
  internal: 500,
  not_implemented: 501,
  upstream_unavailable: 502,
  function_bad_output: 502,
  orchestrator_unavailable: 503,
  function_runtime_missing: 503,
  function_timeout: 504,
} as const;

/** One of the error codes of the contract. */
export type ErrorCode = keyof typeof ERROR_STATUS;

/** The `WWW-Authenticate` challenge every 401 carries (contract "Authentication" 4). */
export const WWW_AUTHENTICATE = 'Bearer realm="svc-cloud"';

/** A failure the client is told about: a contract error code and a short message naming the problem. */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly status: number;

  constructor(code: ErrorCode, message: string) {
    super(message);
    this.name = 'ServiceError';
    this.code = code;
    this.status = ERROR_STATUS[code];
  }
}

/** True when `value` names an error code of the contract. */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_STATUS, value);
}

/** The error envelope `{"error":{"code","message"}}`. */
export interface ErrorEnvelope {
  error: { code: ErrorCode; message: string };
}

/** Builds the envelope of an error. */
export function envelopeOf(err: ServiceError): ErrorEnvelope {
  return { error: { code: err.code, message: err.message } };
}

/**
 * Renders any thrown value as an error Response. A ServiceError keeps its code and message; anything
 * else becomes 500 `internal` whose message holds only the request id (the cause goes to `log`).
 */
export function errorResponse(
  thrown: unknown,
  requestId: string,
  log: (line: string) => void = (line) => console.error(line),
): Response {
  let err: ServiceError;
  if (thrown instanceof ServiceError) {
    err = thrown;
  } else {
    log(`request ${requestId} failed: ${thrown instanceof Error ? (thrown.stack ?? thrown.message) : String(thrown)}`);
    err = new ServiceError('internal', `internal error (request ${requestId})`);
  }
  // The length is declared so that an answer given before a request body was read is complete
  // as soon as its bytes are out, even while the body is still being drained (shared/http/linger.ts).
  const body = new TextEncoder().encode(JSON.stringify(envelopeOf(err)));
  const headers = new Headers({
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(body.byteLength),
    'x-request-id': requestId,
  });
  if (err.code === 'authentication_required') headers.set('www-authenticate', WWW_AUTHENTICATE);
  return new Response(body, { status: err.status, headers });
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
} as const;
