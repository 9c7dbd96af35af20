/**
 * Property-based robustness: random bodies, headers and ids thrown at every registered route answer
 * a well-formed 4xx envelope (or the route's success), never a 500, never a hang or a crash.
 * The route list is the declarations' (shared/api/), so every route added later is covered.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HANDLER_ROUTES, service } from '../../shared/api/index.ts';
import { URL_CREDENTIAL_PARAMS } from '../../shared/schemas/realtime.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

let svc: TestService;
let token: string;
let secret: string;
let accountId: string;
let projectId: string;
beforeAll(async () => {
  svc = await startTestService();
  ({ token, secret, accountId } = await signup(svc));
  const r = await svc.request('POST', '/v0/projects', { token, body: { name: 'fuzz' } });
  projectId = ((await r.json()) as { id: string }).id;
  await svc.request('PUT', `/v0/projects/${projectId}/storage/buckets/fuzz-bucket`, { token });
});
afterAll(() => svc?.stop());

const segment = fc.oneof(
  fc.constantFrom('prj_0000000000000000', 'PRJ', '..', '%2e%2e', '%', '%ZZ', 'a%2Fb', '', 'bucket-1', 'obj_0123456789abcdef', 'SECRET_NAME', 'x'.repeat(300)),
  fc.string({ maxLength: 20 }).map((s) => encodeURIComponent(s)),
);
const authorization = fc.oneof(
  fc.constant<string | undefined>(undefined),
  fc.constantFrom('Bearer', 'Bearer ', 'Basic abc', 'Bearer a, Bearer b', `svc1_${'a'.repeat(32)}_${'b'.repeat(64)}`),
  fc.string({ maxLength: 40 }).map((s) => `Bearer ${s}`),
);
const body = fc.oneof(
  fc.constant<string | undefined>(undefined),
  fc.json({ maxDepth: 3 }),
  fc.string({ maxLength: 200 }),
  fc.constantFrom('{', '[]', 'null', '"x"', '{"name":null}', '{"__proto__":{"x":1}}', '{"label":"' + 'x'.repeat(100) + '"}'),
);
const contentType = fc.constantFrom(undefined, 'application/json', 'text/plain', 'application/octet-stream', 'multipart/form-data; boundary=x');

/** A session of its own for the route that ends the session it is given, so the suite's stays usable. */
async function disposableSession(): Promise<string> {
  const r = await svc.request('POST', '/v0/sessions', { body: { account_id: accountId, account_secret: secret } });
  return ((await r.json()) as { token: string }).token;
}

/** A project of its own for the route that deletes the project it is given, so the suite's stays. */
async function disposableProject(): Promise<string> {
  const r = await svc.request('POST', '/v0/projects', { token, body: { name: 'disposable' } });
  return ((await r.json()) as { id: string }).id;
}

/** Fills a route pattern's parameters: the real project id for `:id` half the time, random otherwise. */
function pathFor(pattern: string, params: string[], useProject: boolean, query: string, project = projectId): string {
  let i = 0;
  const filled = pattern.replace(/:(\w+)\+?/g, (_m, name: string) => {
    const v = params[i++ % params.length] ?? 'x';
    return name === 'id' && useProject ? project : v;
  });
  return filled + query;
}

describe('every route under random input', () => {
  it('answers without 500s, with an error envelope on every error', async () => {
    expect(HANDLER_ROUTES.length).toBeGreaterThan(5);
    for (const { method, path: pattern } of HANDLER_ROUTES) {
      await fc.assert(
        fc.asyncProperty(
          fc.array(segment, { minLength: 1, maxLength: 4 }),
          fc.boolean(),
          fc.oneof(authorization, fc.constant('SESSION')),
          body,
          contentType,
          fc.constantFrom('', '?limit=0', '?limit=abc', '?cursor=%%%', '?cursor=eyJ4IjoxfQ', '?bucket=', '?channel=SYSTEM'),
          async (params, useProject, auth, payload, ctype, query) => {
            const headers: Record<string, string> = {};
            if (auth === 'SESSION') headers.authorization = `Bearer ${pattern === '/v0/sessions/current' ? await disposableSession() : token}`;
            else if (auth !== undefined) headers.authorization = auth;
            if (ctype) headers['content-type'] = ctype;
            const m = method;
            const project = m === 'DELETE' && pattern === '/v0/projects/:id' && useProject ? await disposableProject() : projectId;
            const r = await svc.app.fetch(
              new Request(`http://svc.test${pathFor(pattern, params, useProject, query, project)}`, {
                method: m,
                headers,
                body: m === 'GET' || m === 'HEAD' ? undefined : payload,
              }),
            );
            expect(r.status, `${m} ${pattern}`).not.toBe(500);
            expect(r.headers.get('x-request-id')).toMatch(/^req_/);
            if (r.status >= 400) {
              const e = (await r.json()) as { error: { code: string; message: string } };
              expect(typeof e.error.code).toBe('string');
              expect(e.error.message.length).toBeGreaterThan(0);
              if (r.status === 401) expect(r.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
            } else {
              await r.body?.cancel();
            }
          },
        ),
        { numRuns: 25 },
      );
    }
  }, 240_000);
});

/** Well-formed values of every path parameter, so only the query can be wrong. */
const WELL_FORMED: Record<string, () => string> = {
  id: () => projectId,
  bucket: () => 'fuzz-bucket',
  key: () => 'k',
  key_id: () => '0'.repeat(32),
  name: () => 'FUZZ',
  rest: () => 'x',
  snapshot_id: () => 'snap_0000000000000000',
  upload: () => 'upl_0000000000000000',
};
/** Parameters some route knows (docs/api.md "Decisions"). */
const KNOWN = new Set(['limit', 'cursor', 'bucket', 'channel', 'project']);

describe('every route under an unknown query parameter', () => {
  it('answers 400 naming it, whatever else the request holds', async () => {
    // Routes that read no input take what a prober sends (health), or are 400 anyway (`…/objects/{bucket}`
    // without a key); an invocation's query is the function's own (docs/functions.md "Invoke"); the
    // console's files exist only in a built bundle (handlers/console-assets.ts), so
    // test/e2e/browser-assets.test.ts checks them.
    const consoleRoutes: readonly unknown[] = [service.consolePage, service.consoleFile];
    const routes = HANDLER_ROUTES.filter((r) => r.key !== service.health.key && r.query !== 'forwarded' && !consoleRoutes.includes(r));
    for (const route of routes) {
      const { method, path: pattern } = route;
      const noKey = route.ignoresInput === true;
      // A function's name is lowercase (docs/functions.md "Names"), a secret's uppercase.
      const functionName = pattern.includes('/functions/:name');
      const path = pattern.replace(/:(\w+)\+?/g, (_m, name: string) => (name === 'name' && functionName ? 'fuzz' : WELL_FORMED[name]!()));
      await fc.assert(
        fc.asyncProperty(
          fc.string({ minLength: 1, maxLength: 12 }).filter((n) => !KNOWN.has(n)),
          fc.string({ maxLength: 12 }),
          fc.boolean(),
          async (name, value, withKnown) => {
            const query = new URLSearchParams(withKnown ? [['limit', '1'], [name, value]] : [[name, value]]);
            const m = method;
            const r = await svc.app.fetch(
              new Request(`http://svc.test${path}?${query}`, {
                method: m,
                headers: { authorization: `Bearer ${token}` },
                body: route.body.flow === 'json' ? '{}' : undefined,
              }),
            );
            const label = `${m} ${pattern} ?${query}`;
            expect(r.status, label).toBe(400);
            if (m === 'HEAD') return;
            const e = (await r.json()) as { error: { code: string; message: string } };
            expect(e.error.code, label).toBe('invalid_request');
            // A subscribe refuses a credential's name with its own message (docs/realtime.md "Browsers: tickets").
            const credential = pattern.endsWith('/realtime/subscribe') && (URL_CREDENTIAL_PARAMS as readonly string[]).includes(name);
            if (credential) expect(e.error.message, label).toMatch(new RegExp(`^${name}: credentials are not accepted in a URL`));
            else if (!noKey) expect(e.error.message, label).toMatch(/: is not a known query parameter$/);
          },
        ),
        { numRuns: 10 },
      );
    }
  }, 120_000);
});
