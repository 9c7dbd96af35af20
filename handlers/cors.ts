/**
 * CORS of the handlers (docs/api.md "Browsers and CORS"), applied once around every answer by
 * handlers/index.ts: a preflight is answered 204 before any route or credential is looked at, and
 * every other answer — errors included, so a page can read the envelope — carries the CORS headers
 * of an allowed origin. The policy itself is shared/http/cors.ts, which the `/v2` listener applies too.
 */
import { corsAnswerHeaders, isPreflight, preflightHeaders, type CorsPolicy } from '../shared/http/cors.ts';

/** The 204 answer to a preflight (any path, no credential), or null when `request` is not one. */
export function preflightAnswer(policy: CorsPolicy, request: Request): Response | null {
  if (!isPreflight(request.method, request.headers.get('access-control-request-method'))) return null;
  return new Response(null, { status: 204, headers: preflightHeaders(policy, request.headers.get('origin')) });
}

/** The CORS headers `request`'s answer carries (none for a request without an allowed `Origin`). */
export function corsHeadersFor(policy: CorsPolicy, request: Request): Record<string, string> {
  return corsAnswerHeaders(policy, request.headers.get('origin'));
}
