/**
 * The one error class of the SDK (docs/sdk.md "Errors"): every answer of the service or of the engine
 * that is not a success becomes a `SvcError` carrying its status, its code, its message and the
 * request id of the answer. Network failures, timeouts and aborts are not answers: they stay the
 * platform's own errors (fetch's `TypeError`, an `AbortError` or `TimeoutError` `DOMException`).
 */
import { ERROR_STATUS, isErrorCode, type ErrorCode } from '../shared/error-codes.ts';

export type { ErrorCode } from '../shared/error-codes.ts';

/**
 * The reference engine's own error codes on `/v2` (docs/engine.md "HTTP surface"), answered inside
 * the product envelope and returned by the service unchanged.
 */
export const ENGINE_ERROR_CODES = [
  'bad_protocol_minor',
  'bad_request',
  'sql_error',
  'bad_query',
  'not_found',
  'payload_too_large',
  'internal',
  'shutting_down',
] as const;

/** One of the engine's error codes. */
export type EngineErrorCode = (typeof ENGINE_ERROR_CODES)[number];

/** Where an error answer came from: the service's envelope, or the engine's (`/v2` only). */
export type ErrorSource = 'service' | 'engine';

/** What a `SvcError` is built from. */
export interface SvcErrorInit {
  status: number;
  code: ErrorCode | EngineErrorCode;
  message: string;
  requestId: string | null;
  source?: ErrorSource;
  /** The engine's `X-Svc-Request-Id`, for an engine error. */
  engineRequestId?: string | null;
  /** Seconds the answer's `Retry-After` asked for, when it carried one. */
  retryAfter?: number | null;
}

/** An error answer of the service (or of a project's engine on `/v2`). */
export class SvcError extends Error {
  /** HTTP status of the answer. */
  readonly status: number;
  /** The contract's error code (a fixed list), or the engine's own code when `source` is `engine`. */
  readonly code: ErrorCode | EngineErrorCode;
  /** The answer's `X-Request-Id`: quote it when reporting a problem. */
  readonly requestId: string | null;
  /** `service` for the service's error envelope, `engine` for an engine answer on `/v2`. */
  readonly source: ErrorSource;
  /** The engine's `X-Svc-Request-Id` when the engine answered. */
  readonly engineRequestId: string | null;
  /** Seconds the answer's `Retry-After` asked for, or null. */
  readonly retryAfter: number | null;

  constructor(init: SvcErrorInit) {
    super(init.message);
    this.name = 'SvcError';
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.source = init.source ?? 'service';
    this.engineRequestId = init.engineRequestId ?? null;
    this.retryAfter = init.retryAfter ?? null;
  }

  /** A plain object for logs and `--json` output. */
  toJSON(): Record<string, unknown> {
    return {
      code: this.code,
      message: this.message,
      status: this.status,
      request_id: this.requestId,
      source: this.source,
      ...(this.engineRequestId ? { engine_request_id: this.engineRequestId } : {}),
    };
  }
}

/**
 * The subscriber of a realtime stream could not keep up and was cut off by the service (its last
 * frame was `event: overflow`, docs/realtime.md "Backpressure"). Events were lost; subscribe again.
 */
export class RealtimeOverflowError extends Error {
  /** What the service said: its reason, the queue bound, how many events were dropped. */
  readonly detail: Readonly<Record<string, unknown>>;

  constructor(detail: Record<string, unknown>) {
    super(`realtime subscriber cut off: ${typeof detail.reason === 'string' ? detail.reason : 'overflow'}; events were lost`);
    this.name = 'RealtimeOverflowError';
    this.detail = detail;
  }
}

/** The contract's code of an answer whose body is no error envelope, judged by its status alone. */
export function codeOfStatus(status: number): ErrorCode {
  for (const [code, s] of Object.entries(ERROR_STATUS) as [ErrorCode, number][]) {
    // The first row of a status is its general code (409 → conflict, 502 → upstream_unavailable).
    if (s === status) return code;
  }
  if (status === 416) return 'invalid_request';
  return status >= 500 ? 'internal' : 'invalid_request';
}

/** True when `code` is one of the contract's codes. */
export function isServiceCode(code: unknown): code is ErrorCode {
  return isErrorCode(code);
}

/** True when `code` is one of the engine's codes. */
export function isEngineCode(code: unknown): code is EngineErrorCode {
  return typeof code === 'string' && (ENGINE_ERROR_CODES as readonly string[]).includes(code);
}
