/**
 * Functions end to end against DynamoDB Local and a real host agent running real function runtimes
 * (docs/functions.md): workerd processes in the OS sandbox, one per project and memory_mb, each
 * function version an isolate of its own. Deploy, list, read, versions, delete; invocation with the
 * owner's session and with a project key (method, path, query, headers, bodies streamed both ways with
 * flat memory, concurrent invocations in one isolate, a timeout that leaves the runtime serving, a
 * stuck isolate whose runtime is replaced); the environment and its secrets, a secret change reaching
 * the next invocation only; logs and their redaction; the authorization matrix of every function
 * route. One service and one agent for the file (the runtime's failures, bounds and isolation:
 * functions-runtime.test.ts).
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDeps } from '../../handlers/deps.ts';
import { createApp } from '../../handlers/index.ts';
import { createAgentClient } from '../../shared/agent-client.ts';
import { putSecret } from '../../shared/db/secrets.ts';
import { parseKeyRing, sealSecret } from '../../shared/secrets-crypto.ts';
import { errorOf, FunctionsClient, MODULES, runtimesOf, workerdOf, type RuntimeState } from '../helpers/functions.ts';
import { rssGrowth } from '../helpers/memory.ts';
import { alive } from '../helpers/procs.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

const MiB = 1024 * 1024;

let svc: TestService;
let fns: FunctionsClient;
let token: string;
let otherToken: string;
let project: string;
let key: string;

beforeAll(async () => {
  svc = await startTestService();
  fns = new FunctionsClient((r) => svc.app.fetch(r));
  ({ token } = await signup(svc));
  ({ token: otherToken } = await signup(svc));
  project = await newProject();
  key = await newKey(project);
});
afterAll(() => svc?.stop());

async function newProject(t = token): Promise<string> {
  const r = await svc.request('POST', '/v0/projects', { token: t, body: { name: 'fn' } });
  expect(r.status).toBe(201);
  return ((await r.json()) as { id: string }).id;
}

async function newKey(p: string, t = token): Promise<string> {
  const r = await svc.request('POST', `/v0/projects/${p}/keys`, { token: t, body: {} });
  expect(r.status).toBe(201);
  return ((await r.json()) as { key: string }).key;
}

const fnPath = (p: string, name?: string, rest = '') => `/v0/projects/${p}/functions${name === undefined ? '' : `/${name}`}${rest}`;

function putSecretValue(p: string, name: string, value: string): Promise<Response> {
  return svc.request('PUT', `/v0/projects/${p}/functions/secrets/${name}`, { token, body: { value } });
}

/** Waits until `check` holds (polling), or fails after `ms`. */
async function until(check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The agent's runtimes now. */
const state = (): RuntimeState => svc.agent.ctx.functions.runtimeState();

/** The one runtime of project `p` (of `memoryMb`, by default 128): fails when there is none or more. */
function runtimeOf(p: string, memoryMb = 128) {
  const found = runtimesOf(state(), p, memoryMb);
  expect(found, `runtimes of ${p} at ${memoryMb} MiB`).toHaveLength(1);
  return found[0]!;
}

/** A stream of `total` bytes produced as it is read (never held). */
function lazyStream(total: number): ReadableStream<Uint8Array> {
  let left = total;
  return new ReadableStream({
    pull(c) {
      if (left <= 0) return c.close();
      const n = Math.min(64 * 1024, left);
      left -= n;
      c.enqueue(new Uint8Array(n).fill(98));
    },
  });
}

/**
 * A client over a second app whose hop to the agent is framed as workerd frames it (docs/functions.md
 * "Inside the host agent"): a relayed body of declared length goes with its own `Content-Length`, as
 * an empty POST does with 0. Node's fetch, the hop of `fns`, streams a relayed body without a length.
 */
function fixedLengthHopClient(): FunctionsClient {
  const hop: typeof fetch = async (input, init = {}) => {
    const declared = (init.headers as Record<string, string> | undefined)?.['x-svc-fn-length'];
    if (declared === undefined || !(init.body instanceof ReadableStream)) return fetch(input, init);
    const bytes = new Uint8Array(await new Response(init.body).arrayBuffer());
    const { duplex: _, ...rest } = init as RequestInit & { duplex?: string };
    return fetch(input, { ...rest, body: bytes });
  };
  const app = createApp({ ...buildDeps(svc.env, () => {}), agents: createAgentClient(svc.env.SVCD_INTERNAL_SECRET!, hop) });
  return new FunctionsClient((r) => app.fetch(r));
}

async function drain(body: ReadableStream<Uint8Array> | null): Promise<number> {
  let n = 0;
  if (body) for await (const chunk of body) n += chunk.byteLength;
  return n;
}

describe('deploy, read, list, versions, delete', () => {
  it('creates with 201, then a new version with 200, every field of the record', async () => {
    const p = await newProject();
    const r1 = await fns.deploy(token, p, 'hello', MODULES.echo);
    expect(r1.status).toBe(201);
    const v1 = (await r1.json()) as Record<string, unknown>;
    expect(Object.keys(v1).sort()).toEqual(
      ['created_at', 'max_concurrency', 'memory_mb', 'name', 'project', 'sha256', 'size', 'timeout_ms', 'updated_at', 'version'].sort(),
    );
    expect(v1).toMatchObject({ project: p, name: 'hello', version: 1, size: Buffer.byteLength(MODULES.echo), timeout_ms: 10000, memory_mb: 128, max_concurrency: 8 });
    expect(v1.sha256).toMatch(/^[0-9a-f]{64}$/);
    const r2 = await fns.deploy(token, p, 'hello', `${MODULES.echo}\n// v2`, '?timeout_ms=2000&memory_mb=64&max_concurrency=2');
    expect(r2.status).toBe(200);
    const v2 = (await r2.json()) as Record<string, unknown>;
    expect(v2).toMatchObject({ version: 2, timeout_ms: 2000, memory_mb: 64, max_concurrency: 2, created_at: v1.created_at });
    expect(v2.sha256).not.toBe(v1.sha256);

    const got = await svc.request('GET', fnPath(p, 'hello'), { token });
    expect(got.status).toBe(200);
    expect(await got.json()).toEqual(v2);
    expect(await (await svc.request('GET', fnPath(p), { token })).json()).toEqual({ functions: [v2], next_cursor: null });
    const versions = (await (await svc.request('GET', fnPath(p, 'hello', '/versions'), { token })).json()) as { versions: Record<string, unknown>[] };
    expect(versions.versions.map((v) => v.version)).toEqual([2, 1]);
    expect(versions.versions[1]).toMatchObject({ sha256: v1.sha256, timeout_ms: 10000 });

    const receipts = (await (await svc.request('GET', `/v0/projects/${p}/receipts`, { token })).json()) as { receipts: { op: string; target: string }[] };
    expect(receipts.receipts.filter((x) => x.op === 'function.deploy').map((x) => x.target)).toEqual(['hello@2', 'hello@1']);

    const del = await svc.request('DELETE', fnPath(p, 'hello'), { token });
    expect(del.status).toBe(200);
    expect(await del.json()).toEqual(v2);
    expect((await svc.request('GET', fnPath(p, 'hello'), { token })).status).toBe(404);
    expect((await svc.request('DELETE', fnPath(p, 'hello'), { token })).status).toBe(404);
    expect((await fns.invoke(token, p, 'hello')).status).toBe(404);
    const after = (await (await svc.request('GET', `/v0/projects/${p}/receipts`, { token })).json()) as { receipts: { op: string; target: string }[] };
    expect(after.receipts[0]).toMatchObject({ op: 'function.delete', target: 'hello' });

    // Deployed again: a new function at version 1, none of the old versions listed.
    expect((await fns.deploy(token, p, 'hello', MODULES.echo)).status).toBe(201);
    const again = (await (await svc.request('GET', fnPath(p, 'hello', '/versions'), { token })).json()) as { versions: unknown[] };
    expect(again.versions).toHaveLength(1);
  });

  it('pages the list and the versions', async () => {
    const p = await newProject();
    for (const name of ['a', 'b', 'c']) await fns.deployed(token, p, name, MODULES.hello);
    for (let i = 0; i < 2; i++) await fns.deployed(token, p, 'a', `${MODULES.hello}//${i}`);
    const first = (await (await svc.request('GET', `${fnPath(p)}?limit=2`, { token })).json()) as { functions: { name: string }[]; next_cursor: string };
    expect(first.functions.map((f) => f.name)).toEqual(['a', 'b']);
    const second = (await (await svc.request('GET', `${fnPath(p)}?limit=2&cursor=${encodeURIComponent(first.next_cursor)}`, { token })).json()) as { functions: { name: string }[]; next_cursor: null };
    expect(second).toMatchObject({ functions: [{ name: 'c' }], next_cursor: null });
    const v = (await (await svc.request('GET', `${fnPath(p, 'a', '/versions')}?limit=2`, { token })).json()) as { versions: { version: number }[]; next_cursor: string };
    expect(v.versions.map((x) => x.version)).toEqual([3, 2]);
    const rest = (await (await svc.request('GET', `${fnPath(p, 'a', '/versions')}?cursor=${encodeURIComponent(v.next_cursor)}`, { token })).json()) as { versions: { version: number }[] };
    expect(rest.versions.map((x) => x.version)).toEqual([1]);
  });

  it('refuses a module that does not parse, throws while loading, or has no default fetch, naming the problem', async () => {
    const syntax = await fns.deploy(token, project, 'broken', 'export default { fetch( { }');
    expect(syntax.status).toBe(400);
    expect((await errorOf(syntax)).message).toMatch(/^body: SyntaxError: /);
    const noFetch = await fns.deploy(token, project, 'broken', 'export default { hello() {} }');
    expect((await errorOf(noFetch)).message).toMatch(/no default export with a fetch method/);
    const noDefault = await fns.deploy(token, project, 'broken', 'export const fetch = () => new Response("x");');
    expect((await errorOf(noDefault)).message).toMatch(/no default export with a fetch method/);
    const throws = await fns.deploy(token, project, 'broken', '\nthrow new Error("boom at load")');
    expect((await errorOf(throws)).message).toBe('body: Error: boom at load (line 2)');
    const imports = await fns.deploy(token, project, 'broken', 'import x from "left-pad"; export default { fetch() { return new Response(x) } }');
    expect((await errorOf(imports)).message).toMatch(/left-pad/);
    expect((await svc.request('GET', fnPath(project, 'broken'), { token })).status).toBe(404);
  });

  it('refuses bad names, settings, types and sizes', async () => {
    expect((await errorOf(await fns.deploy(token, project, 'Bad_Name', MODULES.echo))).message).toMatch(/^name: must match/);
    expect((await errorOf(await fns.deploy(token, project, 'secrets', MODULES.echo))).message).toMatch(/^name: is reserved/);
    expect((await errorOf(await fns.deploy(token, project, 'ok', MODULES.echo, '?timeout_ms=99'))).message).toBe('timeout_ms: must be a whole number from 100 to 60000');
    expect((await errorOf(await fns.deploy(token, project, 'ok', MODULES.echo, '?memory_mb=2048'))).message).toBe('memory_mb: must be a whole number from 32 to 1024');
    expect((await errorOf(await fns.deploy(token, project, 'ok', MODULES.echo, '?max_concurrency=0'))).message).toBe('max_concurrency: must be a whole number from 1 to 64');
    expect((await errorOf(await fns.deploy(token, project, 'ok', MODULES.echo, '?other=1'))).message).toBe('other: is not a known query parameter');
    const wrongType = await fns.call('PUT', fnPath(project, 'ok'), token, { headers: { 'content-type': 'text/plain' }, body: MODULES.echo });
    expect((await errorOf(wrongType)).message).toMatch(/^content-type: must be application\/javascript or text\/javascript/);
    expect((await errorOf(await fns.deploy(token, project, 'ok', ''))).message).toBe('body: the module is empty');
    const latin1 = await fns.call('PUT', fnPath(project, 'ok'), token, { headers: { 'content-type': 'text/javascript' }, body: new Uint8Array([0x2f, 0x2f, 0xff]) });
    expect((await errorOf(latin1)).message).toBe('body: the module is not valid UTF-8');
    const declared = await fns.deploy(token, project, 'ok', `// ${'x'.repeat(10 * MiB)}`);
    expect(declared.status).toBe(413);
    expect((await errorOf(declared)).code).toBe('payload_too_large');
    const streamed = await fns.call('PUT', fnPath(project, 'ok'), token, { headers: { 'content-type': 'text/javascript' }, body: lazyStream(10 * MiB + 1) });
    expect(streamed.status).toBe(413);
    expect((await svc.request('GET', fnPath(project, 'ok'), { token })).status).toBe(404);
  });
});

describe('invoke', () => {
  beforeAll(async () => {
    await fns.deployed(token, project, 'echo', MODULES.echo);
    await fns.deployed(token, project, 'mirror', MODULES.mirror);
    await fns.deployed(token, project, 'generate', MODULES.generate);
  });

  it('hands the function the method, path remainder, query, headers and body, and relays its answer', async () => {
    const r = await fns.invoke(token, project, 'echo', '/users/1/?x=2&y=%20', {
      method: 'POST',
      // The length declared as a client on the wire declares it (a Request made in process has none).
      headers: { 'x-custom': 'abc', 'content-type': 'text/plain', 'content-length': '7', connection: 'keep-alive, x-hop', 'x-hop': 'gone', 'x-request-id': 'client-chosen', 'x-svc-fn-key': 'forged' },
      body: 'payload',
    });
    expect(r.status).toBe(201);
    expect(r.headers.get('x-fn')).toBe('yes');
    expect(r.headers.get('set-cookie')).toBe('a=1');
    expect(r.headers.get('x-request-id')).toMatch(/^req_/);
    const seen = (await r.json()) as { method: string; path: string; query: string; origin: string; headers: Record<string, string>; body: string; env: unknown; processEnv: unknown };
    expect(seen).toMatchObject({ method: 'POST', path: '/users/1/', query: '?x=2&y=%20', origin: 'http://svc.test', body: 'payload' });
    expect(seen.headers['x-custom']).toBe('abc');
    expect(seen.headers['content-type']).toBe('text/plain');
    expect(seen.headers['content-length']).toBe('7');
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-hop']).toBeUndefined();
    // The client's own request id, as it sent it; the answer carries the service's.
    expect(seen.headers['x-request-id']).toBe('client-chosen');
    expect(Object.keys(seen.headers).filter((h) => h.startsWith('x-svc-'))).toEqual([]);
    const expected = { PROJECT_ID: project, FUNCTION_NAME: 'echo', CLOUD_ORIGIN: 'http://svc.test' };
    expect(seen.env).toEqual(expected);
    expect(seen.processEnv).toEqual(expected);
  });

  it('hands the function a body of declared length, an empty POST and a PUT exactly, however the hop to the agent is framed', async () => {
    const fixedHop = fixedLengthHopClient();
    type Seen = { method: string; url: string; path: string; query: string; body: string; length: number; headers: Record<string, string> };
    const putBody = `${'é'.repeat(1000)}${'x'.repeat(70_000)}`;
    const putBytes = Buffer.byteLength(putBody);
    for (const [hop, client] of [['streamed hop', fns], ['fixed-length hop', fixedHop]] as const) {
      for (const auth of [token, key]) {
        const post = await client.invoke(auth, project, 'echo', '/a/b?x=1', { method: 'POST', headers: { 'content-length': '11' }, body: 'hello world' });
        expect(post.status, `${hop}: POST`).toBe(201);
        const posted = (await post.json()) as Seen;
        expect(posted, hop).toMatchObject({ method: 'POST', url: 'http://svc.test/a/b?x=1', path: '/a/b', query: '?x=1', body: 'hello world', length: 11 });
        expect(posted.headers['content-length'], hop).toBe('11');

        // A POST without a body: declared 0, or with no length at all (as curl -X POST sends it).
        for (const headers of [{ 'content-length': '0' }, {}] as Record<string, string>[]) {
          const empty = await client.invoke(auth, project, 'echo', '', { method: 'POST', headers });
          expect(empty.status, `${hop}: empty POST ${JSON.stringify(headers)}`).toBe(201);
          const seen = (await empty.json()) as Seen;
          expect(seen, hop).toMatchObject({ method: 'POST', url: 'http://svc.test/', path: '/', query: '', body: '', length: 0 });
          expect(seen.headers['content-length'] ?? '0', hop).toBe('0');
        }

        const put = await client.invoke(auth, project, 'echo', '/items/7/?v=2&w=%20', { method: 'PUT', headers: { 'content-length': String(putBytes) }, body: putBody });
        expect(put.status, `${hop}: PUT`).toBe(201);
        const putSeen = (await put.json()) as Seen;
        expect(putSeen, hop).toMatchObject({ method: 'PUT', url: 'http://svc.test/items/7/?v=2&w=%20', path: '/items/7/', query: '?v=2&w=%20', length: putBytes });
        expect(putSeen.body === putBody, hop).toBe(true);
        expect(putSeen.headers['content-length'], hop).toBe(String(putBytes));

        // The worker's connections stayed usable.
        const get = await client.invoke(auth, project, 'echo', '/c?d=e');
        expect(((await get.json()) as Seen), hop).toMatchObject({ method: 'GET', url: 'http://svc.test/c?d=e', length: 0 });
      }
    }
  });

  it('takes a project key of the project, with every method', async () => {
    for (const method of ['GET', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
      const r = await fns.invoke(key, project, 'echo', '', { method });
      expect(r.status, method).toBe(201);
      expect(((await r.json()) as { method: string; path: string })).toMatchObject({ method, path: '/' });
    }
    const head = await fns.invoke(key, project, 'echo', '/x', { method: 'HEAD' });
    expect(head.status).toBe(201);
    expect(await head.text()).toBe('');
    // A HEAD answers the length the function declares, and leaves its runtime's connection usable.
    const headOfBytes = await fns.invoke(key, project, 'generate', '?bytes=1234', { method: 'HEAD' });
    expect(headOfBytes.headers.get('content-length')).toBe('1234');
    expect(await headOfBytes.text()).toBe('');
    for (let i = 0; i < 3; i++) expect((await fns.invoke(key, project, 'echo')).status).toBe(201);
  });

  it('relays what the function answers: redirects unfollowed, encodings undecoded', async () => {
    await fns.deployed(token, project, 'answers', `
import { gzipSync } from 'node:zlib';
export default { fetch(request) {
  const what = new URL(request.url).pathname;
  if (what === '/redirect') return Response.redirect('https://example.test/elsewhere', 302);
  if (what === '/gzip') return new Response(gzipSync('zipped text'), { headers: { 'content-encoding': 'gzip', 'content-type': 'text/plain' } });
  if (what === '/empty') return new Response(null, { status: 204, headers: { 'x-empty': '1' } });
  return new Response('teapot', { status: 418, statusText: 'I am a teapot' });
} };`);
    const redirect = await fns.invoke(token, project, 'answers', '/redirect');
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get('location')).toBe('https://example.test/elsewhere');
    const gzip = await fns.invoke(token, project, 'answers', '/gzip');
    expect(gzip.headers.get('content-encoding')).toBe('gzip');
    expect(gzip.headers.get('x-svc-fn-content-encoding')).toBeNull();
    const { gunzipSync } = await import('node:zlib');
    expect(gunzipSync(Buffer.from(await gzip.arrayBuffer())).toString()).toBe('zipped text');
    const empty = await fns.invoke(token, project, 'answers', '/empty');
    expect(empty.status).toBe(204);
    expect(empty.headers.get('x-empty')).toBe('1');
    const teapot = await fns.invoke(token, project, 'answers', '/other');
    expect(teapot.status).toBe(418);
    expect(await teapot.text()).toBe('teapot');
  });

  it('serves invocations of a function at once in one isolate of one warm runtime', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'sleep', MODULES.sleep, '?max_concurrency=4');
    const warm = (await (await fns.invoke(token, p, 'sleep')).json()) as { isolate: string };
    const runtime = runtimeOf(p);
    const started = Date.now();
    const all = await Promise.all(Array.from({ length: 4 }, () => fns.invoke(token, p, 'sleep', '?ms=600')));
    const isolates = await Promise.all(all.map(async (r) => ((await r.json()) as { isolate: string }).isolate));
    expect(isolates).toEqual([warm.isolate, warm.isolate, warm.isolate, warm.isolate]);
    expect(Date.now() - started).toBeLessThan(4 * 600);
    // One runtime for the project, the one that served the warm-up.
    expect(runtimesOf(state(), p)).toEqual([{ ...runtime, active: 0 }]);
    expect(alive(runtime.pid)).toBe(true);
  });

  it('drops what a function leaves of a request body, and its isolate serves the next invocation', async () => {
    const p = await newProject();
    await fns.deployed(
      token,
      p,
      'early',
      `let isolate = null; export default { fetch() { isolate ??= crypto.randomUUID(); return new Response(isolate) } };`,
      '?max_concurrency=1',
    );
    const isolates = new Set<string>();
    const pids = new Set<number>();
    // Several times: the runtime resets a connection whose body it left unread, which must never cost the answer.
    for (let i = 0; i < 10; i++) {
      const r = await fns.invoke(token, p, 'early', '', { method: 'POST', body: lazyStream(2 * MiB) });
      expect(r.status).toBe(200);
      isolates.add(await r.text());
      pids.add(runtimeOf(p).pid);
    }
    expect(isolates.size).toBe(1);
    expect(pids.size).toBe(1);
  });

  it('times out one invocation of a shared isolate alone (504): one that only waits leaves its runtime serving', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'sleep', MODULES.sleep, '?timeout_ms=1000');
    const warm = (await (await fns.invoke(token, p, 'sleep')).json()) as { isolate: string };
    const runtime = runtimeOf(p);
    const slow = fns.invoke(token, p, 'sleep', '?ms=10000');
    await new Promise((r) => setTimeout(r, 600));
    const other = fns.invoke(token, p, 'sleep', '?ms=700');
    const timedOut = await slow;
    expect(timedOut.status).toBe(504);
    expect((await errorOf(timedOut)).code).toBe('function_timeout');
    // Its thread was free (the function awaited a timer): the runtime answered its ping and stays.
    expect(alive(runtime.pid)).toBe(true);
    const done = await other;
    expect(done.status).toBe(200);
    expect(((await done.json()) as { isolate: string }).isolate).toBe(warm.isolate);
    const next = (await (await fns.invoke(token, p, 'sleep')).json()) as { isolate: string };
    expect(next.isolate).toBe(warm.isolate);
    expect(runtimeOf(p).pid).toBe(runtime.pid);
    expect(alive(runtime.pid)).toBe(true);
  });

  it('times out an isolate stuck in a loop (504), kills its runtime, and starts a fresh one for the next invocation', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'loop', MODULES.loop, '?timeout_ms=1000');
    const warm = (await (await fns.invoke(token, p, 'loop')).json()) as { isolate: string };
    const runtime = runtimeOf(p);
    const workerd = workerdOf(runtime.pid)!;
    expect(workerd).not.toBeNull();
    const startedBefore = state().started;
    const stuck = await fns.invoke(token, p, 'loop', '?loop');
    expect(stuck.status).toBe(504);
    expect((await errorOf(stuck)).code).toBe('function_timeout');
    // Killed before the 504 was answered: gone, and no longer listed.
    expect(alive(runtime.pid)).toBe(false);
    await until(() => !alive(workerd), 2000);
    expect(runtimesOf(state(), p)).toEqual([]);
    const next = await fns.invoke(token, p, 'loop');
    expect(next.status).toBe(200);
    expect(((await next.json()) as { isolate: string }).isolate).not.toBe(warm.isolate);
    expect(runtimeOf(p).pid).not.toBe(runtime.pid);
    expect(state().started).toBe(startedBefore + 1);
  });

  it('streams 20 MiB both ways at once through a warm runtime with flat memory', async () => {
    // Warm: the runtime is started, and its heap has grown to where its collector keeps it (chunks
    // are freed when V8 collects, which it does by the amount of them, not at once).
    expect(await drain((await fns.invoke(key, project, 'mirror', '', { method: 'POST', body: lazyStream(20 * MiB) })).body)).toBe(20 * MiB);
    const runtime = runtimeOf(project);
    // The process that holds the isolates' memory (under the sandbox, the namespace holder's child).
    const workerd = workerdOf(runtime.pid);
    expect(workerd).not.toBeNull();
    const before = peakRss(workerd!);
    let echoed = 0;
    const growth = await rssGrowth(async () => {
      const r = await fns.invoke(key, project, 'mirror', '', { method: 'POST', body: lazyStream(20 * MiB) });
      expect(r.status).toBe(200);
      echoed = await drain(r.body);
    });
    expect(echoed).toBe(20 * MiB);
    expect(growth).toBeLessThan(16 * MiB);
    // The same runtime served it, and one that held the body would have grown by it (twice over, holding both).
    expect(runtimeOf(project).pid).toBe(runtime.pid);
    expect(peakRss(workerd!) - before).toBeLessThan(16 * MiB);
  });

  it('declares a stream\'s length only through a FixedLengthStream, as Workers do: a Content-Length header on a stream is dropped', async () => {
    await fns.deployed(token, project, 'lengthy', `
export default { fetch(request) {
  const stream = () => new ReadableStream({ start(c) { c.enqueue(new Uint8Array(1234).fill(97)); c.close(); } });
  if (new URL(request.url).pathname === '/header') return new Response(stream(), { headers: { 'content-length': '1234' } });
  const { readable, writable } = new FixedLengthStream(1234);
  void stream().pipeTo(writable);
  return new Response(readable);
} };`);
    const header = await fns.invoke(key, project, 'lengthy', '/header');
    expect(header.status).toBe(200);
    expect(header.headers.get('content-length')).toBeNull();
    expect((await header.arrayBuffer()).byteLength).toBe(1234);
    const fixed = await fns.invoke(key, project, 'lengthy', '/fixed');
    expect(fixed.headers.get('content-length')).toBe('1234');
    expect((await fixed.arrayBuffer()).byteLength).toBe(1234);
  });

  it('streams 20 MiB down with its declared length', async () => {
    const r = await fns.invoke(key, project, 'generate', `?bytes=${20 * MiB}`);
    expect(r.headers.get('content-length')).toBe(String(20 * MiB));
    let got = 0;
    const growth = await rssGrowth(async () => {
      got = await drain(r.body);
    });
    expect(got).toBe(20 * MiB);
    expect(growth).toBeLessThan(16 * MiB);
  });
});

/** The peak RSS of a process (VmHWM), bytes. */
function peakRss(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

describe('node: builtins that make sense without a host', () => {
  it('run crypto, buffer, util, events, stream, url, path and zlib as on Workers (nodejs_compat)', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'builtins', `
import { createHash, randomUUID } from 'node:crypto';
import { Buffer } from 'node:buffer';
import { format } from 'node:util';
import { EventEmitter } from 'node:events';
import { Readable } from 'node:stream';
import { URL as NodeURL } from 'node:url';
import { join } from 'node:path';
import { gzipSync, gunzipSync } from 'node:zlib';
export default {
  async fetch() {
    const emitter = new EventEmitter();
    let heard = null;
    emitter.on('x', (v) => (heard = v));
    emitter.emit('x', 'event');
    const chunks = [];
    for await (const c of Readable.from(['a', 'b'])) chunks.push(c);
    return Response.json({
      sha256: createHash('sha256').update('abc').digest('hex'),
      uuid: /^[0-9a-f-]{36}$/.test(randomUUID()),
      base64: Buffer.from('hi').toString('base64'),
      format: format('%s=%d', 'n', 4),
      heard,
      stream: chunks.join(''),
      url: new NodeURL('https://a.test/b?c=1').searchParams.get('c'),
      path: join('/a', 'b', '../c'),
      zlib: gunzipSync(gzipSync('round trip')).toString(),
    });
  },
};`);
    const r = await fns.invoke(token, p, 'builtins');
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({
      sha256: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
      uuid: true,
      base64: 'aGk=',
      format: 'n=4',
      heard: 'event',
      stream: 'ab',
      url: '1',
      path: '/a/c',
      zlib: 'round trip',
    });
  });
});

describe('environment and secrets', () => {
  it('injects the project secrets into env and process.env, and nothing of the agent', async () => {
    const p = await newProject();
    expect((await putSecretValue(p, 'API_KEY', 'k-123')).status).toBe(201);
    expect((await putSecretValue(p, 'DB_URL', 'postgres://x')).status).toBe(201);
    await fns.deployed(token, p, 'env', MODULES.env);
    const r = await fns.invoke(token, p, 'env', '', { headers: { host: 'api.example.test' } });
    const { env, process: proc } = (await r.json()) as { env: Record<string, string>; process: Record<string, string> };
    const expected = { API_KEY: 'k-123', DB_URL: 'postgres://x', PROJECT_ID: p, FUNCTION_NAME: 'env', CLOUD_ORIGIN: 'http://svc.test' };
    expect(env).toEqual(expected);
    expect(proc).toEqual(expected);
    expect(Object.keys(env)).toEqual(['API_KEY', 'DB_URL', 'PROJECT_ID', 'FUNCTION_NAME', 'CLOUD_ORIGIN']);
  });

  it('cannot have PROJECT_ID, FUNCTION_NAME or CLOUD_ORIGIN shadowed, even by an item written around the check', async () => {
    const p = await newProject();
    expect((await putSecretValue(p, 'PROJECT_ID', 'prj_0000000000000000')).status).toBe(400);
    const ring = parseKeyRing(svc.agent.ctx.settings)!;
    for (const name of ['PROJECT_ID', 'CLOUD_ORIGIN']) {
      const at = new Date().toISOString();
      await putSecret(svc.db, { project: p, name, actor: 'acct_0000000000000000', requestId: 'req_0', at }, await sealSecret(ring, p, name, 'forged'));
    }
    // A put through the API tells the agent (a direct write does not).
    expect((await putSecretValue(p, 'API_KEY', 'real')).status).toBe(201);
    await fns.deployed(token, p, 'env', MODULES.env);
    const { env, process: proc } = (await (await fns.invoke(token, p, 'env')).json()) as Record<string, Record<string, string>>;
    for (const seen of [env!, proc!]) expect(seen).toMatchObject({ PROJECT_ID: p, CLOUD_ORIGIN: 'http://svc.test', FUNCTION_NAME: 'env', API_KEY: 'real' });
    expect(Object.keys(env!).slice(-3)).toEqual(['PROJECT_ID', 'FUNCTION_NAME', 'CLOUD_ORIGIN']);
  });

  it('runs the next invocation after a put with the new value, while one already running keeps the old', async () => {
    const p = await newProject();
    const k = await newKey(p);
    expect((await putSecretValue(p, 'API_KEY', 'old')).status).toBe(201);
    await fns.deployed(token, p, 'sleep', MODULES.sleep);
    const warm = (await (await fns.invoke(k, p, 'sleep')).json()) as { isolate: string; env: string };
    expect(warm.env).toBe('old');
    const runtime = runtimeOf(p);
    // Runs in the warm isolate.
    const long = fns.invoke(k, p, 'sleep', '?ms=1500');
    await until(() => svc.agent.ctx.functions.inFlight(p) === 1);
    expect((await putSecretValue(p, 'API_KEY', 'new')).status).toBe(200);
    // The next invocation runs in an isolate loaded with the new set, in the same runtime.
    const next = (await (await fns.invoke(k, p, 'sleep')).json()) as { env: string; process: string; isolate: string };
    expect(next).toMatchObject({ env: 'new', process: 'new' });
    expect(next.isolate).not.toBe(warm.isolate);
    const before = (await (await long).json()) as { env: string; process: string; isolate: string };
    expect(before).toMatchObject({ env: 'old', process: 'old', isolate: warm.isolate });
    // Its invocation done, the old isolate serves nothing more: every later invocation runs in the new one.
    for (let i = 0; i < 3; i++) expect(await (await fns.invoke(k, p, 'sleep')).json()).toEqual({ env: 'new', process: 'new', isolate: next.isolate });
    expect(runtimeOf(p).pid).toBe(runtime.pid);
    // Deleted: the next invocation runs without it.
    expect((await svc.request('DELETE', `/v0/projects/${p}/functions/secrets/API_KEY`, { token })).status).toBe(200);
    expect(await (await fns.invoke(k, p, 'sleep')).json()).toMatchObject({ env: null, process: null });
  });

  it('runs a new deploy at the next invocation', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'v', `export default { fetch() { return new Response('one') } }`);
    expect(await (await fns.invoke(token, p, 'v')).text()).toBe('one');
    await fns.deployed(token, p, 'v', `export default { fetch() { return new Response('two') } }`);
    expect(await (await fns.invoke(token, p, 'v')).text()).toBe('two');
  });
});

describe('logs', () => {
  it('keeps the console per function with every secret value redacted, on disk too', async () => {
    const p = await newProject();
    expect((await putSecretValue(p, 'API_KEY', 'sk-live-0123456789')).status).toBe(201);
    expect((await putSecretValue(p, 'OTHER_SECRET', 'hunter2-hunter2')).status).toBe(201);
    await fns.deployed(token, p, 'logs', MODULES.logs);
    expect(await (await fns.invoke(token, p, 'logs')).text()).toBe('logged');
    const r = await svc.request('GET', `${fnPath(p, 'logs', '/logs')}?tail=50`, { token });
    expect(r.status).toBe(200);
    const { lines, project: lp, name } = (await r.json()) as { lines: string[]; project: string; name: string };
    expect({ lp, name }).toEqual({ lp: p, name: 'logs' });
    const text = lines.join('\n');
    expect(text).toContain('stdout v1 token is [secret API_KEY] other [secret OTHER_SECRET]');
    expect(text).toContain('stderr v1 Error: failed with [secret API_KEY]');
    expect(text).toContain('stdout v1 plain line');
    expect(text).not.toContain('sk-live');
    expect(text).not.toContain('hunter2');
    const onDisk = readFileSync(svc.agent.ctx.functions.logs.path(p, 'logs'), 'utf8');
    expect(onDisk).not.toContain('sk-live');
    expect(onDisk).not.toContain('hunter2');
    const tail = (await (await svc.request('GET', `${fnPath(p, 'logs', '/logs')}?tail=1`, { token })).json()) as { lines: string[] };
    expect(tail.lines).toHaveLength(1);
    expect((await svc.request('GET', `${fnPath(p, 'logs', '/logs')}?tail=0`, { token })).status).toBe(400);
    expect((await svc.request('GET', fnPath(p, 'nope', '/logs'), { token })).status).toBe(404);
  });
});

describe('authorization of every function route', () => {
  const routes = (p: string): [string, string][] => [
    ['PUT', fnPath(p, 'echo')],
    ['GET', fnPath(p)],
    ['GET', fnPath(p, 'echo')],
    ['GET', fnPath(p, 'echo', '/versions')],
    ['GET', fnPath(p, 'echo', '/logs')],
    ['DELETE', fnPath(p, 'echo')],
    ['GET', fnPath(p, 'echo', '/invoke')],
    ['POST', fnPath(p, 'echo', '/invoke/a/b')],
  ];
  const init = (method: string): RequestInit => (method === 'PUT' ? { headers: { 'content-type': 'text/javascript' }, body: MODULES.echo } : {});

  it('answers 401 with the challenge to no credential, 404 to another account', async () => {
    for (const [method, path] of routes(project)) {
      const anonymous = await fns.call(method, path, null, init(method));
      expect(anonymous.status, `${method} ${path}`).toBe(401);
      expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
      const stranger = await fns.call(method, path, otherToken, init(method));
      expect(stranger.status, `${method} ${path}`).toBe(404);
    }
  });

  it('takes a project key only to invoke: 401 on the owner routes', async () => {
    for (const [method, path] of routes(project).filter(([, path]) => !path.includes('/invoke'))) {
      expect((await fns.call(method, path, key, init(method))).status, `${method} ${path}`).toBe(401);
    }
  });

  it('answers 403 to another project\'s key, 401 to a revoked key on the very next call', async () => {
    const other = await newProject();
    const otherKey = await newKey(other);
    const denied = await fns.invoke(otherKey, project, 'echo');
    expect(denied.status).toBe(403);
    expect((await errorOf(denied)).code).toBe('authorization_denied');
    const doomed = await newKey(project);
    const first = await fns.invoke(doomed, project, 'echo');
    expect(first.status, await first.clone().text()).toBe(201);
    const keyId = doomed.split('_')[1]!;
    expect((await svc.request('DELETE', `/v0/projects/${project}/keys/${keyId}`, { token })).status).toBe(200);
    const revoked = await fns.invoke(doomed, project, 'echo');
    expect(revoked.status).toBe(401);
    expect(revoked.headers.get('www-authenticate')).toBe('Bearer realm="svc-cloud"');
    const unknown = await fns.invoke(`svc1_${'0'.repeat(32)}_${'1'.repeat(64)}`, project, 'echo');
    expect(unknown.status).toBe(401);
  });

  it('answers 404 for a function of another project, whoever asks', async () => {
    const other = await newProject(otherToken);
    expect((await fns.invoke(token, other, 'echo')).status).toBe(404);
    expect((await fns.invoke(key, project, 'missing')).status).toBe(404);
  });
});
