/**
 * The SDK and the route declarations (shared/api/; docs/sdk.md "How the SDK is made"): the committed
 * client/routes.gen.ts is what client/generate-routes.ts writes from them, every request the SDK
 * sends is a declared route with the credential it declares, and every declared route has an SDK
 * method or is listed below with the reason it has none.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { matchRoute, ROUTES, type RouteDecl } from '../shared/api/index.ts';
import { INVOKE_METHODS } from '../shared/api/functions.ts';
import { encodeEnvelope, PRODUCT_CONTENT_TYPE } from './envelope.ts';
import { routesModuleText } from './generate-routes.ts';
import { createClient, type SvcClient } from './index.ts';

/** Declared routes without an SDK method, and why. */
const NOT_IN_SDK: Record<string, string> = {
  'GET /v0/openapi.json': 'the API document is for tools (docs/api.md "How the reference is made"); the SDK is typed from the same declarations',
  'GET /console': 'the web console\'s page (docs/console.md), for browsers',
  'GET /console/:file': 'the web console\'s files (docs/console.md), for browsers',
  'DELETE /v0/projects/:id/storage/objects/:bucket/:key+': 'storage.delete removes an object through `DELETE …/storage/objects` with `{ bucket, key }`, the same deletion',
  'PUT /v0/projects/:id/storage/objects/:bucket': 'an object path without a key, always 400',
  'GET /v0/projects/:id/storage/objects/:bucket': 'an object path without a key, always 400',
  'HEAD /v0/projects/:id/storage/objects/:bucket': 'an object path without a key, always 400',
  'DELETE /v0/projects/:id/storage/objects/:bucket': 'an object path without a key, always 400',
  'OPTIONS /v0/projects/:id/storage/resumable': 'TUS discovery, for generic TUS clients; the SDK speaks the one version it knows (docs/storage.md "Resumable uploads")',
};

const PRJ = 'prj_0123456789abcdef';

/** One call of every SDK method that sends a request (each invocation method with and without a path). */
const CALLS: ((c: SvcClient, signal: AbortSignal) => unknown)[] = [
  (c) => c.health(),
  (c) => c.signup(),
  (c) => c.createSession({ account_id: 'acct_x', account_secret: 's' }),
  (c) => c.me(),
  (c) => c.endSession(),
  (c) => c.rotateSecret('s'),
  (c) => c.receipts(PRJ).first(),
  (c) => c.sql('SELECT 1'),
  (c) => c.batch(['SELECT 1']),
  (c) => c.search('notes', 'x'),
  (c) => c.capabilities(),
  (c) => c.dropTable('notes'),
  (c) => c.v2('PUT', 'x', {}),
  (c) => c.v2('PATCH', 'x', {}),
  (c) => c.projects.create({ name: 'p' }),
  (c) => c.projects.list().first(),
  (c) => c.projects.get(PRJ),
  (c) => c.project(PRJ).get(),
  (c) => c.project(PRJ).rename('q'),
  (c) => c.project(PRJ).delete(),
  (c) => c.project(PRJ).logs(),
  (c, signal) => c.project(PRJ).followLogs({ signal }).next(),
  (c) => c.project(PRJ).wakeup(),
  (c) => c.project(PRJ).relocate(),
  (c) => c.project(PRJ).sleep(),
  (c) => c.project(PRJ).head(),
  (c) => c.project(PRJ).restore('snap_x'),
  (c) => c.project(PRJ).snapshots.create(),
  (c) => c.project(PRJ).snapshots.list().first(),
  (c) => c.project(PRJ).snapshots.get('snap_x'),
  (c) => c.project(PRJ).snapshots.delete('snap_x'),
  (c) => c.project(PRJ).snapshots.download('snap_x'),
  (c) => c.project(PRJ).snapshots.import(new Blob(['tar'])),
  (c) => c.project(PRJ).replaced.list().first(),
  (c) => c.project(PRJ).replaced.delete('data.replaced-x'),
  (c) => c.project(PRJ).keys.create(),
  (c) => c.project(PRJ).keys.list().first(),
  (c) => c.project(PRJ).keys.revoke('k'),
  (c) => c.project(PRJ).secrets.set('A', 'v'),
  (c) => c.project(PRJ).secrets.list().first(),
  (c) => c.project(PRJ).secrets.get('A'),
  (c) => c.project(PRJ).secrets.delete('A'),
  (c) => c.project(PRJ).realtime.publish('chat', 'e'),
  (c) => c.project(PRJ).realtime.ticket('chat'),
  (c, signal) => c.project(PRJ).realtime.subscribe('chat', { signal, tickets: false })[Symbol.asyncIterator]().next(),
  (c) => c.project(PRJ).receipts.list().first(),
  (c) => c.project(PRJ).storage.createBucket('b'),
  (c) => c.project(PRJ).storage.deleteBucket('b'),
  (c) => c.project(PRJ).storage.listBuckets().first(),
  (c) => c.project(PRJ).storage.uploadTicket({ bucket: 'b', key: 'k' }),
  (c) => c.project(PRJ).storage.downloadTicket({ bucket: 'b', key: 'k' }),
  (c) => c.project(PRJ).storage.upload('b', 'a/k', 'bytes'),
  (c) => c.project(PRJ).storage.download('b', 'a/k'),
  (c) => c.project(PRJ).storage.head('b', 'a/k'),
  (c) => c.project(PRJ).storage.list('b').first(),
  (c) => c.project(PRJ).storage.delete('b', 'k'),
  (c) => c.project(PRJ).functions.deploy('f', 'export default {}'),
  (c) => c.project(PRJ).functions.list().first(),
  (c) => c.project(PRJ).functions.get('f'),
  (c) => c.project(PRJ).functions.versions('f').first(),
  (c) => c.project(PRJ).functions.delete('f'),
  (c) => c.project(PRJ).storage.createUpload('b', 'k', 10),
  (c) => c.project(PRJ).storage.uploadStatus(`http://sdk.test/v0/projects/${PRJ}/storage/resumable/upl_0123456789abcdef`),
  (c) => c.project(PRJ).storage.appendUpload(`http://sdk.test/v0/projects/${PRJ}/storage/resumable/upl_0123456789abcdef`, 0, new Uint8Array(3)),
  (c) => c.project(PRJ).storage.cancelUpload(`http://sdk.test/v0/projects/${PRJ}/storage/resumable/upl_0123456789abcdef`),
  (c) => c.project(PRJ).functions.logs('f'),
  ...INVOKE_METHODS.flatMap((method) => [
    (c: SvcClient) => c.project(PRJ).functions.invoke('f', { method }),
    (c: SvcClient) => c.project(PRJ).functions.invoke('f', { method, path: '/a/b' }),
  ]),
];

interface Sent {
  method: string;
  path: string;
  authorization: string | null;
}

/** Runs `call` against a fetch that records each request and answers a small success. */
async function sentBy(call: (c: SvcClient, signal: AbortSignal) => unknown): Promise<Sent[]> {
  const sent: Sent[] = [];
  const stop = new AbortController();
  const fetch = async (url: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const u = new URL(String(url));
    sent.push({ method: init?.method ?? 'GET', path: u.pathname, authorization: new Headers(init?.headers).get('authorization') });
    // One request is all this looks at: a subscription or a log stream stops here.
    stop.abort(new DOMException('recorded', 'AbortError'));
    if (u.pathname.startsWith('/v2/')) return new Response(encodeEnvelope({}) as Uint8Array<ArrayBuffer>, { headers: { 'content-type': PRODUCT_CONTENT_TYPE } });
    return Response.json({ next_cursor: null, ticket: 'rtt_x' });
  };
  const client = createClient({ baseUrl: 'http://sdk.test', token: 'tok', key: 'svc1_key', fetch: fetch as typeof globalThis.fetch, retries: 0 });
  await Promise.resolve(call(client, stop.signal)).catch(() => {});
  return sent;
}

describe('the SDK and the route declarations', () => {
  it('takes its routes from the committed client/routes.gen.ts, which is what the generator writes (run `node client/generate-routes.ts` after changing a declaration)', () => {
    expect(readFileSync(new URL('./routes.gen.ts', import.meta.url), 'utf8')).toBe(routesModuleText());
  });

  it('sends only declared routes, each with the credential it declares, and has a method for every declared route not listed as outside it', async () => {
    const covered = new Map<string, RouteDecl>();
    for (const call of CALLS) {
      const sent = await sentBy(call);
      expect(sent.length, String(call)).toBeGreaterThan(0);
      for (const s of sent) {
        const match = matchRoute(s.method, s.path);
        expect(match, `${s.method} ${s.path} is no declared route`).toBeDefined();
        const { route } = match!;
        const expected = { none: null, session: 'Bearer tok', key: 'Bearer svc1_key', 'session-or-key': 'Bearer svc1_key' }[route.access];
        expect(s.authorization, `${route.key} takes ${route.access}`).toBe(expected);
        covered.set(route.key, route);
      }
    }
    const declared = ROUTES.map((r) => r.key);
    const missing = declared.filter((k) => !covered.has(k) && !(k in NOT_IN_SDK));
    expect(missing, 'declared routes with no SDK method: add one, or list the route in NOT_IN_SDK with the reason').toEqual([]);
    expect(Object.keys(NOT_IN_SDK).filter((k) => covered.has(k) || !declared.includes(k)), 'NOT_IN_SDK entries that are covered or not declared').toEqual([]);
  });
});
