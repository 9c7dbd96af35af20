/**
 * What a failed outgoing HTTP request tells about its connection, judged once for every client of
 * the service: the handlers' agent client (fetch), the local front and the agent's origin (undici),
 * and the `/v2` listener's engine and peer pools (undici). Both name the cause's `code`.
 */

/** Causes that mean no connection was ever made: refused, unresolved, unroutable, or not made in time. */
const NEVER_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/** The code of `err`'s cause (fetch and undici errors), or of `err` itself; undefined when none. */
export function failureCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  const code = e?.cause?.code ?? e?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * True when the request failed before any connection was made, so nothing of it was sent and it may
 * go elsewhere (another listener, another try) whatever its method.
 */
export function neverConnected(err: unknown): boolean {
  const code = failureCode(err);
  return code !== undefined && NEVER_CONNECTED.has(code);
}
