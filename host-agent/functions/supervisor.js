// The supervisor of a project's function runtime (docs/functions.md "Isolation"): the one trusted
// worker of a workerd process that runs one project's functions. It is plain JavaScript because
// workerd runs it as it is, from the runtime's configuration directory.
//
// Every function version runs in an isolate of its own, loaded on first use through workerd's
// Worker Loader (`env.LOADER`) from what the host agent's control socket answers for its target id:
// the module, its environment (the project's secrets and the three service variables) and the
// origin its requests carry. The loaded isolate gets no binding but its environment's strings, and
// its `fetch` goes to the agent's egress filter (`env.EGRESS`); it never sees `LOADER` or `AGENT`.
//
// Requests from the agent (over the runtime's unix socket):
//   <any method> /<target id><the client's path and query>   an invocation; the rest of the request is the client's
//   GET /.check/<target id>                                  loads the version: {ok:true} or {ok:false, problem}
//   GET /.ping                                               answers at once (the event loop is free)
//
// A function's console reaches the agent as one JSON line per call on workerd's stdout
// (`{"t":<target id>,"s":"o"|"e","m":<text>}`), so the agent knows whose log it is.

/** Headers of the hop from the agent, never the client's (RFC 9110 §7.6.1, and Host). */
const HOP_BY_HOP = ['host', 'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade'];

/** The origin of each loaded target's requests (`CLOUD_ORIGIN`). */
const origins = new Map();

/** The entry module of a loaded version: console capture, the checks around `fetch`, and the check entrypoint. */
function entry(target) {
  return `import * as mod from './main.js';
import { inspect } from 'node:util';
const target = ${JSON.stringify(target)};
const write = console.log.bind(console);
const text = (args) => args.map((a) => (typeof a === 'string' ? a : inspect(a))).join(' ');
for (const [method, s] of [['log', 'o'], ['info', 'o'], ['debug', 'o'], ['trace', 'e'], ['warn', 'e'], ['error', 'e']]) {
  Object.defineProperty(console, method, { value: (...args) => write(JSON.stringify({ t: target, s, m: text(args) })), writable: false, configurable: false });
}
for (const [stream, s] of [['stdout', 'o'], ['stderr', 'e']]) {
  const out = globalThis.process?.[stream];
  if (out) out.write = (chunk) => { write(JSON.stringify({ t: target, s, m: String(chunk).replace(/\\n$/, '') })); return true; };
}
const failed = (message) => new Response(JSON.stringify({ error: { code: 'function_bad_output', message } }), {
  status: 502,
  headers: { 'content-type': 'application/json; charset=utf-8', 'x-svc-rt-failed': 'bad_output' },
});
/**
 * The client's request as the function sees it, built inside its own isolate: what crossing from the
 * supervisor added (Transfer-Encoding, an empty body for none) goes, the client's Content-Length is
 * put back, and the agent's two marks (x-svc-fn-rt-body, x-svc-fn-rt-length) are removed.
 */
function clientRequest(request) {
  const hasBody = request.headers.get('x-svc-fn-rt-body') === '1';
  const length = request.headers.get('x-svc-fn-rt-length');
  const method = request.headers.get('x-svc-fn-rt-method') ?? request.method;
  const headers = new Headers(request.headers);
  for (const name of ['x-svc-fn-rt-body', 'x-svc-fn-rt-length', 'x-svc-fn-rt-method', 'transfer-encoding', 'content-length']) headers.delete(name);
  if (length !== null) headers.set('content-length', length);
  if (hasBody && method === request.method) return new Request(request, { headers });
  if (hasBody) {
    // A HEAD with a body: a Request takes one only from a request that has one, under its own method.
    try {
      return new Request(request, { method, headers });
    } catch {
      return new Request(request.url, { method, headers, signal: request.signal });
    }
  }
  return new Request(request.url, { method, headers, signal: request.signal });
}
export default {
  async fetch(request, env, ctx) {
    let response;
    try {
      response = await mod.default.fetch(clientRequest(request), env, ctx);
    } catch (err) {
      console.error('Uncaught (in fetch):', err);
      return failed('the function threw an exception (see its logs)');
    }
    if (!(response instanceof Response)) {
      console.error('fetch returned ' + (response === null ? 'null' : typeof response) + ', not a Response');
      return failed('the function returned a value that is not a Response');
    }
    return response;
  },
};
export const check = {
  fetch() {
    const ok = typeof mod.default?.fetch === 'function';
    return Response.json(ok ? { ok } : { ok, problem: 'the module has no default export with a fetch method' });
  },
};
`;
}

/** The isolate of `target`, loaded from what the agent answers for it. */
function load(env, target) {
  return env.LOADER.get(target, async () => {
    const answer = await env.AGENT.fetch(`http://agent/targets/${target}`);
    if (!answer.ok) throw new Error(`the agent has no target ${target} (${answer.status})`);
    const spec = await answer.json();
    origins.set(target, spec.origin);
    return {
      compatibilityDate: spec.compatibilityDate,
      compatibilityFlags: spec.compatibilityFlags,
      mainModule: 'svc-entry.js',
      modules: { 'svc-entry.js': entry(target), 'main.js': spec.code },
      env: spec.env,
      globalOutbound: env.EGRESS,
    };
  });
}

/** `SyntaxError: Unexpected end of input (line 1)` from workerd's "Failed to start Worker" text. */
function problemOf(err) {
  const text = String(err && err.message ? err.message : err);
  const lines = text.split('\n').map((l) => l.trim());
  const uncaught = lines.find((l) => l.startsWith('Uncaught '));
  const at = lines.find((l) => /^at main\.js:\d+/.test(l));
  const line = at ? /^at main\.js:(\d+)/.exec(at)[1] : null;
  const what = uncaught ? uncaught.slice('Uncaught '.length) : lines[0];
  return `${what}${line ? ` (line ${line})` : ''}`.slice(0, 500);
}

/** The answer of a failure of the runtime itself (never the function's own answer). */
function refused(kind, message) {
  return new Response(JSON.stringify({ error: { code: 'function_bad_output', message } }), {
    status: 502,
    headers: { 'content-type': 'application/json; charset=utf-8', 'x-svc-rt-failed': kind },
  });
}

/** The function's answer as it travels back to the agent: its Content-Encoding renamed, its bytes as they are. */
function relayed(response) {
  if (!response.headers.has('content-encoding')) return response;
  const headers = new Headers(response.headers);
  headers.set('x-svc-fn-content-encoding', headers.get('content-encoding'));
  headers.delete('content-encoding');
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers, encodeBody: 'manual' });
}

export default {
  async fetch(request, env) {
    const url = request.url;
    const pathStart = url.indexOf('/', url.indexOf('//') + 2);
    const path = url.slice(pathStart);
    if (path === '/.ping') return new Response('ok');
    if (path.startsWith('/.check/')) {
      const target = path.slice('/.check/'.length);
      try {
        return await load(env, target).getEntrypoint('check').fetch('http://check/');
      } catch (err) {
        return Response.json({ ok: false, problem: problemOf(err) });
      }
    }
    const end = path.indexOf('/', 1);
    const target = path.slice(1, end < 0 ? undefined : end);
    const rest = end < 0 ? '/' : path.slice(end);
    let worker;
    try {
      worker = load(env, target);
      if (!origins.has(target)) {
        // Not loaded yet: the first call loads it (and learns its origin).
        const verdict = await (await worker.getEntrypoint('check').fetch('http://check/')).json();
        if (!verdict.ok) throw new Error(verdict.problem);
      }
    } catch (err) {
      console.error(JSON.stringify({ t: target, s: 'a', m: `the function failed to start: ${problemOf(err)}` }));
      return refused('start', 'the function failed to start (see its logs)');
    }
    try {
      // The agent sends exactly the client's headers and two marks (whether the client sent a body,
      // the length it declared) that the function's isolate reads and removes; what this hop adds
      // (Host, Connection, its framing) goes.
      const headers = new Headers(request.headers);
      for (const name of HOP_BY_HOP) headers.delete(name);
      headers.delete('content-length');
      const hasBody = headers.get('x-svc-fn-rt-body') === '1';
      const url = `${origins.get(target)}${rest}`;
      // A HEAD crosses to the isolate as a GET marked with its method, which the isolate gives back
      // to the function: workerd drops a HEAD's answer length between isolates, and answers this
      // HEAD from the full answer with its length.
      // (A HEAD with a body crosses as it is: a request with a body keeps its method.)
      const asGet = request.method === 'HEAD' && !hasBody;
      if (asGet) headers.set('x-svc-fn-rt-method', 'HEAD');
      // A redirect the function answers is the client's to follow, not this hop's. A GET or HEAD
      // with a body cannot be built from an init (fetch forbids it), only from a request that has one.
      const forwarded =
        hasBody && (request.method === 'GET' || request.method === 'HEAD')
          ? new Request(new Request(url, request), { headers, redirect: 'manual' })
          : new Request(url, { method: asGet ? 'GET' : request.method, headers, body: hasBody ? request.body : null, signal: request.signal, redirect: 'manual' });
      return relayed(await worker.getEntrypoint().fetch(forwarded));
    } catch (err) {
      // Loaded, then ended without an answer (process.exit, the client went away).
      console.error(JSON.stringify({ t: target, s: 'a', m: `the invocation ended without an answer: ${problemOf(err)}` }));
      return refused('bad_output', 'the function ended without answering (see its logs)');
    }
  },
};
