/**
 * The program of a function worker (docs/functions.md "Workers"): one Node process per worker,
 * started by the host agent under Node's permission model (read access to this program and the one
 * module, nothing else). It imports only `node:` builtins, so nothing else needs to be readable; the
 * agent runs it as JavaScript (types stripped once at the agent's start, host-agent/functions/spawn.ts).
 *
 *   argv: <mode: serve | check> <module path> <slots>
 *   fd 0: the start message, JSON `{env, origin}`, then end of file
 *   fd 1, fd 2: the function's console (the agent keeps it as the function's log, secrets redacted)
 *   fd 3: the control pipe. The worker writes JSON lines: `{"started":true}` as soon as this program
 *         runs (a worker that ends before it never ran: the runtime is missing), then `{"ok":true}`
 *         once the module is loaded and checked, or `{"ok":false,"problem":"…"}` (then it exits).
 *         Its end from the agent's side (the agent retired the worker, or died) ends the worker.
 *   fd 4 … fd 3+slots (serve): one HTTP/1.1 connection from the agent each, one invocation at a
 *         time on each, so a worker serves up to `slots` invocations at once (docs/functions.md "Workers")
 *
 * The environment is set here, from the start message, before the module is imported: the process
 * itself starts with an empty one, so nothing of the agent's reaches it and no variable the project
 * defines (`NODE_OPTIONS`, say) is ever read by Node as its own.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { pathToFileURL } from 'node:url';

/** What the agent hands a worker at start. */
interface StartMessage {
  env: Record<string, string>;
  origin: string;
}

/** The shape the module's default export must have (docs/functions.md "Module shape"). */
interface FetchHandler {
  fetch(request: Request, env: Readonly<Record<string, string>>, ctx: InvocationContext): unknown;
}

/** The third argument of `fetch`, as in Workers. */
interface InvocationContext {
  waitUntil(task: unknown): void;
  passThroughOnException(): void;
}

/** Hop-by-hop headers (RFC 9110 §7.6.1): never handed to the function nor taken from its answer. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host']);
/** The function's own `Content-Encoding` travels renamed (shared/schemas/functions.ts FUNCTION_HEADERS). */
const CONTENT_ENCODING_AS = 'x-svc-fn-content-encoding';
/** A HEAD arrives as a GET marked so, and its answer's length travels renamed (FUNCTION_HEADERS). */
const METHOD_AS = 'x-svc-fn-method';
const CONTENT_LENGTH_AS = 'x-svc-fn-content-length';

/** The method the client used (a HEAD reaches the worker as a marked GET). */
function methodOf(req: IncomingMessage): string {
  return req.method === 'GET' && req.headers[METHOD_AS] === 'HEAD' ? 'HEAD' : (req.method ?? 'GET');
}

const [mode, modulePath, slotsArg] = process.argv.slice(2) as [string, string, string];
const control = new Socket({ fd: 3, readable: true, writable: true });
control.write('{"started":true}\n');
// The agent's end of the control pipe closing means it retired this worker or is gone.
control.on('end', () => process.exit(0));
control.on('error', () => process.exit(0));
control.resume();

/** Tells the agent how the start went; a failed start ends the worker. */
function report(ok: boolean, problem?: string): void {
  control.write(`${JSON.stringify(ok ? { ok } : { ok, problem })}\n`);
  if (!ok || mode === 'check') control.end(() => process.exit(ok ? 0 : 1));
}

/** One line about an error, without the agent's paths: `SyntaxError: Unexpected token (line 3)`. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return `the module threw ${typeof err === 'string' ? JSON.stringify(err.slice(0, 200)) : typeof err}`;
  const url = pathToFileURL(modulePath).href;
  const at = (err.stack ?? '').split('\n').find((l) => l.includes(url));
  const line = at ? /:(\d+)(?::\d+)?\)?\s*$/.exec(at)?.[1] : undefined;
  return `${err.name}: ${err.message.split(url).join('module')}${line ? ` (line ${line})` : ''}`.slice(0, 500);
}

async function readStart(): Promise<StartMessage> {
  let text = '';
  for await (const chunk of process.stdin) text += String(chunk);
  return JSON.parse(text) as StartMessage;
}

/** What the function may not do even within its permissions: signal other processes (docs/functions.md "Isolation"). */
function lockDown(): void {
  const refuse = () => {
    throw new Error('process.kill is not available to functions');
  };
  for (const name of ['kill', '_kill']) Object.defineProperty(process, name, { value: refuse, writable: false, configurable: false });
}

const start = await readStart();
for (const name of Object.keys(process.env)) delete process.env[name];
Object.assign(process.env, start.env);
const env = Object.freeze({ ...start.env });
lockDown();
process.on('unhandledRejection', (reason) => console.error('Unhandled rejection:', reason));
process.on('uncaughtException', (err) => {
  console.error('Uncaught exception:', err);
  process.exit(70);
});

let handler: FetchHandler;
try {
  const mod = (await import(pathToFileURL(modulePath).href)) as { default?: unknown };
  const candidate = mod.default as Partial<FetchHandler> | null | undefined;
  if (candidate === null || (typeof candidate !== 'object' && typeof candidate !== 'function') || typeof candidate.fetch !== 'function') {
    throw new TypeError('the module has no default export with a fetch method (export default { fetch(request, env, ctx) { … } })');
  }
  handler = candidate as FetchHandler;
} catch (err) {
  const problem = err instanceof TypeError && err.message.startsWith('the module has no default') ? err.message : describe(err);
  if (mode === 'serve') console.error(`The module failed to load: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  report(false, problem);
  await new Promise(() => {});
}
if (mode === 'check') {
  report(true);
  await new Promise(() => {});
}

/** Answers the one error the worker itself gives: the function's output was not an answer. */
async function badOutput(res: ServerResponse, message: string): Promise<void> {
  await drained(res.req);
  const body = JSON.stringify({ error: { code: 'function_bad_output', message } });
  res.writeHead(502, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/**
 * The request body as a web stream, read ahead by at most 64 KiB (in bytes: Readable.toWeb counts
 * chunks, and would read far ahead of the function). Cancelling it, or a function that answers
 * without reading it all, discards the rest instead of destroying the request, whose connection (a
 * pipe that cannot be opened again) must stay usable for the next invocation.
 */
function bodyOf(req: IncomingMessage): ReadableStream<Uint8Array> {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let done = false;
  const onData = (chunk: Buffer) => {
    controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    if ((controller.desiredSize ?? 0) <= 0) req.pause();
  };
  req.pause();
  req.on('data', onData);
  req.once('end', () => {
    if (!done) controller.close();
    done = true;
  });
  req.once('error', (err) => {
    if (!done) controller.error(err);
    done = true;
  });
  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
      },
      pull() {
        req.resume();
      },
      cancel() {
        done = true;
        discard(req);
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: 64 * 1024 }),
  );
}

/** Reads and drops what is left of a request body. */
function discard(req: IncomingMessage): void {
  if (req.complete) return;
  req.removeAllListeners('data');
  req.on('data', () => {});
  req.resume();
}

/**
 * Resolves once the whole request body has arrived, dropping what nobody read. An answer is only
 * completed after that: the agent's HTTP client closes a connection whose answer completes while it
 * is still sending the body, and a worker's connections are pipes that cannot be opened again.
 */
function drained(req: IncomingMessage): Promise<void> {
  if (req.complete) return Promise.resolve();
  discard(req);
  return new Promise((resolve) => req.once('end', resolve).once('close', resolve));
}

function requestOf(req: IncomingMessage, res: ServerResponse): Request {
  const headers = new Headers();
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (!HOP_BY_HOP.has(name) && name !== METHOD_AS) headers.append(raw[i]!, raw[i + 1]!);
  }
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  const method = methodOf(req);
  const hasBody = method !== 'GET' && method !== 'HEAD';
  // Concatenated, not resolved: a path starting `//` stays a path.
  return new Request(`${start.origin}${req.url ?? '/'}`, {
    method,
    headers,
    body: hasBody ? bodyOf(req) : null,
    signal: controller.signal,
    ...(hasBody ? { duplex: 'half' } : {}),
  } as RequestInit);
}

async function respond(req: IncomingMessage, res: ServerResponse, response: Response): Promise<void> {
  const isHead = methodOf(req) === 'HEAD';
  // An answer begun before the request body has all arrived is sent chunked, so that its end can wait
  // for the body (`drained`): a declared length would complete it with its last byte.
  const early = !req.complete;
  const head: string[] = [];
  for (const [name, value] of response.headers) {
    if (HOP_BY_HOP.has(name) || name === CONTENT_ENCODING_AS || name === CONTENT_LENGTH_AS) continue;
    if (early && !isHead && name === 'content-length') continue;
    if (name === 'content-encoding') head.push(CONTENT_ENCODING_AS, value);
    else if (isHead && name === 'content-length') head.push(CONTENT_LENGTH_AS, value);
    else head.push(name, value);
  }
  // The answer to a HEAD goes back as the answer to a GET with no body.
  if (isHead) head.push('content-length', '0');
  res.writeHead(response.status, response.statusText || undefined, head);
  const body = isHead ? null : response.body;
  if (!body) {
    await response.body?.cancel().catch(() => {});
    await drained(req);
    res.end();
    return;
  }
  // Read by hand rather than piped through Node streams (a fraction of the cost per answer). Writes
  // made before the loop next waits on the event loop leave together: a body that is ready at once
  // goes out with its head in one write, a stream's first chunk is never held back for its second.
  const socket = res.socket;
  socket?.cork();
  setImmediate(() => socket?.uncork());
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!res.write(value) && !res.destroyed) await new Promise((resolve) => res.once('drain', resolve).once('close', resolve));
    if (res.destroyed) {
      await reader.cancel().catch(() => {});
      return;
    }
  }
  await drained(req);
  res.end();
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const waiting: Promise<unknown>[] = [];
  const ctx: InvocationContext = {
    waitUntil(task) {
      waiting.push(Promise.resolve(task).catch((err: unknown) => console.error('waitUntil task failed:', err)));
    },
    passThroughOnException() {},
  };
  let response: unknown;
  try {
    response = await handler.fetch(requestOf(req, res), env, ctx);
  } catch (err) {
    console.error('Uncaught (in fetch):', err);
    return await badOutput(res, 'the function threw an exception (see its logs)');
  }
  if (!(response instanceof Response)) {
    console.error(`fetch returned ${response === null ? 'null' : typeof response}, not a Response`);
    return await badOutput(res, 'the function returned a value that is not a Response');
  }
  try {
    await respond(req, res, response);
  } catch (err) {
    console.error('The response body failed:', err);
    res.destroy();
  }
}

const server = createServer({ requestTimeout: 0, headersTimeout: 0, keepAliveTimeout: 0, maxHeaderSize: 64 * 1024 }, (req, res) => {
  void handle(req, res);
});
server.keepAliveTimeout = 0;
const slots = Math.max(1, Number(slotsArg) || 1);
for (let fd = 4; fd < 4 + slots; fd++) server.emit('connection', new Socket({ fd, readable: true, writable: true }));
report(true);
