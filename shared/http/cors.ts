/**
 * Cross-origin resource sharing for `/v0` and `/v2` (Fetch standard "CORS protocol"; docs/api.md
 * "Browsers and CORS"): which origins `SVCD_CORS_ORIGINS` allows, what a preflight is answered, and
 * the headers an allowed origin's answers carry. Plain values only, so the handlers (web Response,
 * handlers/cors.ts) and the `/v2` listener (node:http, host-agent/dataplane/server.ts) apply the one
 * policy the same way.
 *
 * The service authenticates with bearer tokens in `Authorization`, never cookies, so no answer
 * carries `Access-Control-Allow-Credentials`, and `*` (which the Fetch standard forbids together
 * with credentials) is a valid answer for an open deployment.
 */

/** Request headers a browser may send cross-origin (answered in `Access-Control-Allow-Headers`). */
export const CORS_ALLOW_HEADERS = [
  'Authorization',
  'Content-Type',
  'X-Svc-Protocol-Minor',
  'X-Svc-Project',
  'Range',
  'If-None-Match',
  // The object routes' other conditions (docs/storage.md "Conditional requests").
  'If-Match',
  'If-Modified-Since',
  'If-Range',
  // EventSource sends it when it reconnects; the service ignores it (docs/realtime.md).
  'Last-Event-ID',
  // Resumable uploads (TUS 1.0.0; docs/storage.md "Resumable uploads").
  'Tus-Resumable',
  'Upload-Length',
  'Upload-Offset',
  'Upload-Metadata',
  'Upload-Defer-Length',
  'Upload-Concat',
] as const;

/** Answer headers a cross-origin script may read (answered in `Access-Control-Expose-Headers`). */
export const CORS_EXPOSE_HEADERS = [
  'X-Request-Id',
  'ETag',
  'X-Svc-Object-Id',
  'X-Svc-Request-Id',
  'X-Svc-Protocol-Minor',
  'Content-Range',
  'Retry-After',
  'WWW-Authenticate',
  'Content-Length',
  'Accept-Ranges',
  // Resumable uploads (TUS 1.0.0; docs/storage.md "Resumable uploads").
  'Location',
  'Tus-Resumable',
  'Tus-Version',
  'Tus-Extension',
  'Tus-Max-Size',
  'Upload-Offset',
  'Upload-Length',
  'Upload-Metadata',
  'Upload-Expires',
] as const;

/** Methods any route of the service takes (function invocations take any of them). */
export const CORS_ALLOW_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** How long a browser may reuse a preflight answer, in seconds (Chromium caps it at 7200). */
export const CORS_MAX_AGE_SECONDS = 600;

/** The origins a deployment allows: every origin (`*`), or an exact list (empty: none). */
export type CorsPolicy = { readonly any: true } | { readonly any: false; readonly origins: ReadonlySet<string> };

/** No cross-origin access: the policy of an empty `SVCD_CORS_ORIGINS`. */
export const NO_CORS: CorsPolicy = { any: false, origins: new Set() };

const ALLOW_HEADERS = CORS_ALLOW_HEADERS.join(', ');
const EXPOSE_HEADERS = CORS_EXPOSE_HEADERS.join(', ');
const ALLOW_METHODS = CORS_ALLOW_METHODS.join(', ');

/**
 * Why one entry of `SVCD_CORS_ORIGINS` is not an origin as browsers send it in `Origin`
 * (scheme, host, and a port only when not the scheme's default; RFC 6454 §6.1), or null when it is.
 */
export function corsOriginProblem(entry: string): string | null {
  if (entry === 'null') return '"null" is the origin of sandboxed and file pages and is never allowed';
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return `${JSON.stringify(entry)} is not an origin like https://app.example.com`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `${JSON.stringify(entry)} must be an http or https origin`;
  if (url.origin !== entry) return `${JSON.stringify(entry)} must be written as the browser sends it: ${url.origin}`;
  return null;
}

/**
 * Parses `SVCD_CORS_ORIGINS`: empty or unset (no cross-origin access), `*` (every origin), or
 * origins separated by commas. Throws an Error naming the first bad entry.
 */
export function parseCorsOrigins(value: string | undefined): CorsPolicy {
  const entries = (value ?? '').split(',').map((e) => e.trim()).filter(Boolean);
  if (entries.length === 0) return NO_CORS;
  if (entries.includes('*')) {
    if (entries.length > 1) throw new Error('* allows every origin and cannot be listed with others');
    return { any: true };
  }
  for (const entry of entries) {
    const problem = corsOriginProblem(entry);
    if (problem) throw new Error(problem);
  }
  return { any: false, origins: new Set(entries) };
}

/** The `Access-Control-Allow-Origin` value for a request's `Origin`, or null when it is not allowed. */
export function allowedOrigin(policy: CorsPolicy, origin: string | null | undefined): string | null {
  if (!origin) return null;
  if (policy.any) return '*';
  return policy.origins.has(origin) ? origin : null;
}

/** True for a CORS preflight: `OPTIONS` asking `Access-Control-Request-Method` (Fetch standard §3.2.2). */
export function isPreflight(method: string | undefined, requestMethod: string | null | undefined): boolean {
  return method === 'OPTIONS' && typeof requestMethod === 'string' && requestMethod !== '';
}

/**
 * `Vary: Origin` when the answer's CORS headers depend on the origin (an exact list and a request
 * that names one), so a cache never hands one origin's answer to another.
 */
function varyOf(policy: CorsPolicy, origin: string | null | undefined): Record<string, string> {
  return !policy.any && policy.origins.size > 0 && origin ? { vary: 'Origin' } : {};
}

/**
 * Headers of an answer to a request carrying `origin`: the CORS headers when the origin is allowed,
 * none otherwise (the browser then refuses the answer; its status and body are the same either way).
 */
export function corsAnswerHeaders(policy: CorsPolicy, origin: string | null | undefined): Record<string, string> {
  const headers = varyOf(policy, origin);
  const allowed = allowedOrigin(policy, origin);
  if (allowed === null) return headers;
  headers['access-control-allow-origin'] = allowed;
  headers['access-control-expose-headers'] = EXPOSE_HEADERS;
  return headers;
}

/**
 * Headers of the 204 answer to a preflight, for any path (an unknown route then answers its 404
 * with CORS headers, which the browser lets the script read). A disallowed origin gets none.
 */
export function preflightHeaders(policy: CorsPolicy, origin: string | null | undefined): Record<string, string> {
  const headers = varyOf(policy, origin);
  const allowed = allowedOrigin(policy, origin);
  if (allowed === null) return headers;
  headers['access-control-allow-origin'] = allowed;
  headers['access-control-allow-methods'] = ALLOW_METHODS;
  headers['access-control-allow-headers'] = ALLOW_HEADERS;
  headers['access-control-max-age'] = String(CORS_MAX_AGE_SECONDS);
  return headers;
}
