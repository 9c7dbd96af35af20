/**
 * Routes: the web console (docs/console.md; declared in shared/api/service.ts), static files built
 * by build.mjs and embedded in the handlers bundle (handlers/console-assets.ts). No credential: the
 * page signs in through the API like any other client, from the same origin.
 * - `GET /console` → 308 to `/console/` (relative asset URLs resolve under it);
 * - `GET /console/` → the page; `GET /console/:file` → its scripts and styles.
 * Validated by ETag (`If-None-Match` → 304); hashed file names are cached for a year. A strict
 * Content-Security-Policy allows nothing but this origin.
 */
import { service } from '../../shared/api/index.ts';
import { errors } from '../../shared/errors.ts';
import { CONSOLE_ASSETS, type ConsoleAsset } from '../console-assets.ts';
import { implement } from '../implement.ts';

/**
 * Only this origin's scripts, styles and API; no inline script, no framing, no form posts elsewhere.
 * `connect-src 'self'`: the console calls `/v0` and `/v2` of the origin that served it.
 */
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const byName = new Map<string, ConsoleAsset>((CONSOLE_ASSETS ?? []).map((a) => [a.name, a]));

export const implementations = [
  // itty-router matches `/console` and `/console/` alike: the path tells them apart.
  implement(service.consolePage, ({ request, url }) => {
    if (url.pathname.endsWith('/')) return serve(request, '');
    return new Response(null, { status: 308, headers: { location: '/console/' } });
  }),
  implement(service.consoleFile, ({ request }) => serve(request, request.params.file ?? '')),
];

function serve(request: Request, name: string): Response {
  if (CONSOLE_ASSETS === null) throw errors.notFound('the console is not part of this build (node build.mjs builds it into the handlers bundle)');
  const asset = byName.get(name);
  if (!asset) throw errors.notFound(`no console file ${JSON.stringify(name).slice(0, 80)}`);
  const headers: Record<string, string> = {
    'content-type': asset.type,
    etag: asset.etag,
    'cache-control': asset.immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
  };
  if (asset.name === '') {
    headers['content-security-policy'] = CSP;
    headers['x-frame-options'] = 'DENY';
  }
  const inm = request.headers.get('if-none-match');
  if (inm !== null && inm.split(',').some((t) => t.trim().replace(/^W\//, '') === asset.etag)) {
    return new Response(null, { status: 304, headers });
  }
  return new Response(asset.body, { status: 200, headers });
}
