/**
 * The errors of the `/v2` HTTP surface. Status and code come from one table, so an enveloped error
 * body can never disagree with its status (docs/api.md "Errors").
 */
export const API_ERROR_STATUS = {
  /** Malformed request: bad JSON, a missing or mistyped field (the message names it). */
  bad_request: 400,
  /** `X-Svc-Protocol-Minor` absent, not an integer, or above the engine's minor (3). */
  bad_protocol_minor: 400,
  /** SQLite refused or failed a statement; the message is SQLite's. */
  sql_error: 400,
  /** The full-text query does not parse (FTS5 query syntax). */
  bad_query: 400,
  /** Unknown route, wrong method, unknown table. */
  not_found: 404,
  /**
   * The request ran longer than the engine's statement time limit (`--statement-timeout-ms`,
   * capabilities `sql.statement_timeout_ms`) and was interrupted; nothing it did was committed.
   */
  statement_timeout: 400,
  /** The request body is over the engine's limit (capabilities `max_body_bytes`). */
  payload_too_large: 413,
  /** An engine bug; the message carries only the request id. */
  internal: 500,
  /**
   * The process running the request ended under it (out of memory, killed): nothing it did was
   * committed, unless the message says it was already committing. The engine serves on.
   */
  statement_aborted: 500,
  /** The engine is stopping (SIGTERM received); retry against the next process. */
  shutting_down: 503,
} as const;

/** An error code of the `/v2` surface. */
export type ApiErrorCode = keyof typeof API_ERROR_STATUS;

/** An error answered as `{"error":{"code","message"}}` with the status of its code. */
export class ApiError extends Error {
  readonly code: ApiErrorCode;

  constructor(code: ApiErrorCode, message: string) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
  }

  /** The HTTP status of this error's code. */
  get status(): number {
    return API_ERROR_STATUS[this.code];
  }
}
