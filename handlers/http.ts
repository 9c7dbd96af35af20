/**
 * Small HTTP helpers of the handlers: JSON answers, bounded JSON bodies, validated path and query
 * parameters, and the refusal of input a route does not take.
 */
import { z } from 'zod';
import { errors } from '../shared/errors.ts';
import { queryOf } from '../shared/http/body.ts';

/** The helpers both HTTP sides share (shared/http/body.ts), re-exported for the routes. */
export { json, pathParam, queryOf, readBounded, readJson } from '../shared/http/body.ts';

/**
 * Refuses a request body on a route that takes none (docs/api.md "Decisions"): a declared length
 * other than 0, a chunked body on a method without one, or any byte of a body stream. Reads at
 * most the first chunk; an empty body is no body.
 */
export async function noBody(request: Request): Promise<void> {
  const declared = request.headers.get('content-length');
  const refuse = () => errors.invalid('body: this route takes no body');
  if (declared !== null && !/^\s*0+\s*$/.test(declared)) throw refuse();
  if (!request.body) {
    // A web Request cannot carry a GET's or HEAD's body; the server that built it keeps its framing.
    if ((request.method === 'GET' || request.method === 'HEAD') && request.headers.has('transfer-encoding')) throw refuse();
    return;
  }
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    if (value.byteLength > 0) {
      await reader.cancel().catch(() => {});
      throw refuse();
    }
  }
}

/** Refuses every query parameter: for routes that take none. */
export function noQuery(url: URL): void {
  queryOf(url, NO_QUERY);
}

const NO_QUERY = z.strictObject({});

/** The request's `Content-Length`, or null when it streams without one; a malformed one is 400. */
export function declaredLength(request: Request): number | null {
  const raw = request.headers.get('content-length');
  if (raw === null) return null;
  if (!/^\d{1,16}$/.test(raw.trim())) throw errors.invalid('content-length: must be a non-negative integer');
  return Number(raw.trim());
}
