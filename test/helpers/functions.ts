/**
 * Functions in tests and benchmarks (docs/functions.md): the modules the suites deploy, and a small
 * client over any way of sending a request (the app in process, or a base URL over HTTP).
 */

/** Sends a request to the service under test. */
export type Send = (request: Request) => Promise<Response>;

/** A sender over HTTP to `base`. */
export function httpSend(base: string): Send {
  return (request) => {
    const url = new URL(request.url);
    return fetch(`${base}${url.pathname}${url.search}`, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      redirect: 'manual',
      ...(request.body ? { duplex: 'half' } : {}),
    } as RequestInit);
  };
}

/** Modules the suites deploy, by what they do. */
export const MODULES = {
  /**
   * Answers 201 with what it received (method, URL and its path, query and origin, headers, body and
   * its length in bytes) and the three service variables.
   */
  echo: `
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const bytes = new Uint8Array(await request.arrayBuffer());
    const body = new TextDecoder().decode(bytes);
    const pick = (e) => ({ PROJECT_ID: e.PROJECT_ID, FUNCTION_NAME: e.FUNCTION_NAME, CLOUD_ORIGIN: e.CLOUD_ORIGIN });
    return Response.json({
      method: request.method, url: request.url, path: url.pathname, query: url.search, origin: url.origin,
      headers: Object.fromEntries(request.headers), body, length: bytes.byteLength, env: pick(env), processEnv: pick(process.env),
    }, { status: 201, headers: { 'x-fn': 'yes', 'set-cookie': 'a=1' } });
  },
};`,
  /** Streams the request body back as the answer. */
  mirror: `export default { fetch(request) { return new Response(request.body, { headers: { 'content-type': 'application/octet-stream' } }); } };`,
  /** Answers `?bytes=N` bytes, generated as they are read. */
  generate: `
export default {
  fetch(request) {
    const total = Number(new URL(request.url).searchParams.get('bytes'));
    const block = new Uint8Array(64 * 1024).fill(97);
    let sent = 0;
    // As in Workers, a stream's length is declared by a FixedLengthStream (a Content-Length header on a stream is not).
    const { readable, writable } = new FixedLengthStream(total);
    void new ReadableStream({
      pull(c) {
        if (sent >= total) return c.close();
        const n = Math.min(block.length, total - sent);
        c.enqueue(block.slice(0, n));
        sent += n;
      },
    }, { highWaterMark: 0 }).pipeTo(writable);
    return new Response(readable);
  },
};`,
  /** Waits `?ms=` then answers `API_KEY` as `env` and `process.env` see it, and which isolate it ran in. */
  sleep: `
const isolate = crypto.randomUUID();
export default {
  async fetch(request, env) {
    const ms = Number(new URL(request.url).searchParams.get('ms') ?? 0);
    await new Promise((r) => setTimeout(r, ms));
    return Response.json({ env: env.API_KEY ?? null, process: process.env.API_KEY ?? null, isolate });
  },
};`,
  /** Every variable of its environment, both ways. */
  env: `export default { fetch(request, env) { return Response.json({ env, process: { ...process.env } }); } };`,
  throws: `export default { fetch() { throw new Error('kaboom'); } };`,
  string: `export default { fetch() { return 'hello'; } };`,
  exits: `export default { fetch() { process.exit(3); } };`,
  /** Answers `ok`: the smallest function, for the benchmark. */
  hello: `export default { fetch() { return new Response('ok'); } };`,
  /** Writes secrets to its console. */
  logs: `
export default {
  fetch(request, env) {
    console.log('token is', env.API_KEY, 'other', env.OTHER_SECRET);
    console.error(new Error('failed with ' + process.env.API_KEY));
    console.log('plain line');
    return new Response('logged');
  },
};`,
  /** Tries what a function must not be able to do; answers what each attempt got. */
  probe: `
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { Worker } from 'node:worker_threads';
const attempt = (f) => { try { const v = f(); return { ok: true, value: String(v).slice(0, 200) }; } catch (e) { return { ok: false, error: String(e && e.code || e) }; } };
export default {
  fetch(request) {
    const dir = new URL(request.url).searchParams.get('dir');
    return Response.json({
      stateDir: attempt(() => readdirSync(dir)),
      passwd: attempt(() => readFileSync('/etc/passwd', 'utf8')),
      write: attempt(() => writeFileSync('/tmp/svc-function-probe', 'x')),
      spawn: attempt(() => { const r = spawnSync('/bin/true'); if (r.error) throw r.error; return r.status; }),
      worker: attempt(() => new Worker('1', { eval: true })),
      kill: attempt(() => process.kill(process.pid, 0)),
      agentSettings: Object.keys(process.env).filter((k) => k.startsWith('SVCD_') || k === 'PATH' || k === 'HOME'),
    });
  },
};`,
} as const;

/** A function client over `send`, authenticated with `auth` unless told otherwise. */
export class FunctionsClient {
  readonly #send: Send;
  constructor(send: Send) {
    this.#send = send;
  }

  /** Any request to `path`, with a bearer when `auth` is given. */
  call(method: string, path: string, auth?: string | null, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (auth) headers.set('authorization', `Bearer ${auth}`);
    const body = init.body ?? null;
    return this.#send(new Request(`http://svc.test${path}`, { ...init, method, headers, body, ...(body instanceof ReadableStream ? { duplex: 'half' } : {}) } as RequestInit));
  }

  /** Deploys `source` as function `name` of project `p` (`query`: `?timeout_ms=…`). */
  deploy(auth: string, p: string, name: string, source: string, query = ''): Promise<Response> {
    return this.call('PUT', `/v0/projects/${p}/functions/${name}${query}`, auth, { headers: { 'content-type': 'application/javascript' }, body: source });
  }

  /** Deploys and expects success; answers the function record. */
  async deployed(auth: string, p: string, name: string, source: string, query = ''): Promise<Record<string, unknown>> {
    const r = await this.deploy(auth, p, name, source, query);
    if (r.status !== 200 && r.status !== 201) throw new Error(`deploy ${name}: ${r.status} ${await r.text()}`);
    return (await r.json()) as Record<string, unknown>;
  }

  /** Invokes function `name` of `p` at `/invoke{rest}`. */
  invoke(auth: string | null, p: string, name: string, rest = '', init: RequestInit = {}): Promise<Response> {
    return this.call(init.method ?? 'GET', `/v0/projects/${p}/functions/${name}/invoke${rest}`, auth, init);
  }
}

/** The error envelope of an answer. */
export async function errorOf(r: Response): Promise<{ code: string; message: string }> {
  return ((await r.json()) as { error: { code: string; message: string } }).error;
}
