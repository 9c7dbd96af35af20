/**
 * The contract's error codes and their HTTP statuses (the interface contract, "Errors"; docs/api.md
 * "Errors"): the one table shared/errors.ts renders with and the SDK (client/errors.ts) reads answers
 * with. Web-standard and import-free, so browsers and the SDK's declarations carry nothing else.
 */

/** Every error code the contract allows, with its status. */
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

/** True when `value` names an error code of the contract. */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_STATUS, value);
}
