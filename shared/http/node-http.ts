/**
 * Serves a fetch-style handler (`(Request) => Promise<Response>`) on node:http, streaming both
 * ways: the request body reaches the handler as a web stream, the response body is piped out with
 * backpressure, and a client that disconnects aborts the request's signal.
 *
 * Also what every node:http listener of the service shares (the `/v2` listener, the agent's internal
 * API, the Node entry, the local front): request targets in absolute form (RFC 9112 §3.2.2), a
 * connection closed after an answer given before the body was read (RFC 9112 §9.6, docs/dataplane.md
 * "Refused bodies"), errors answered through the one renderer (`answerError`, shared/errors.ts),
 * and malformed requests answered with the error envelope too.
 */
import { createServer, IncomingMessage, STATUS_CODES, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Server as NetServer, Socket } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ServiceError, renderError, writeError } from '../errors.ts';
import { newRequestId } from '../ids.ts';

/** A running server and how to stop it. */
export interface Served {
  server: Server;
  url: string;
  port: number;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Request targets
// ---------------------------------------------------------------------------------------------

const ABSOLUTE = /^https?:\/\/([^/?#]*)([^#]*)/i;
const AUTHORITY = Symbol('authority');
const TARGET = Symbol('target');

/**
 * The origin-form of a request target (RFC 9112 §3.2): itself when it starts with `/`, the path
 * and query of an absolute-form `http(s)://authority/path?query`, or null for any other form
 * (`*`, authority-form, garbage), which no route of the service takes.
 */
export function originForm(target: string): { path: string; authority: string | null } | null {
  if (target.startsWith('/')) return { path: target, authority: null };
  const m = ABSOLUTE.exec(target);
  if (!m) return null;
  const rest = m[2]!;
  return { path: rest === '' ? '/' : rest.startsWith('?') ? `/${rest}` : rest, authority: m[1]! };
}

/**
 * The request class of every listener: `url` is always origin-form, so every route sees
 * `/v0/health` whether the client sent that or `http://host/v0/health` (RFC 9112 §3.2.2: a server
 * must accept the absolute form, and then takes the host from it, not from `Host`). A target that
 * is neither keeps its raw value and is refused by `badTarget`.
 */
export class ServiceRequest extends IncomingMessage {
  declare [TARGET]: string;
  declare [AUTHORITY]: string | null;
}
Object.defineProperty(ServiceRequest.prototype, 'url', {
  configurable: true,
  enumerable: true,
  get(this: ServiceRequest) {
    return this[TARGET];
  },
  set(this: ServiceRequest, raw: string) {
    const form = raw === '' ? null : originForm(raw);
    this[TARGET] = form ? form.path : raw;
    this[AUTHORITY] = form ? form.authority : null;
  },
});

/** The host of an absolute-form target (the client's `Host` is ignored then), else null. */
export function targetAuthority(req: IncomingMessage): string | null {
  return (req as ServiceRequest)[AUTHORITY] ?? null;
}

/** A ServiceError for a target that is not origin-form once read (`*`, authority-form), else null. */
export function badTarget(req: IncomingMessage): ServiceError | null {
  if ((req.url ?? '').startsWith('/')) return null;
  return new ServiceError('invalid_request', 'the request target must be a path (/v0/...) or an absolute http URL');
}

/** Server options of every listener: the request class above. */
export const SERVER_OPTIONS = { IncomingMessage: ServiceRequest } as const;

// ---------------------------------------------------------------------------------------------
// Answers given before the body was read
// ---------------------------------------------------------------------------------------------

/**
 * How long the rest of a refused body is read and discarded after the answer, at most, and how
 * long it may pause (docs/dataplane.md "Refused bodies"; the figures of a common lingering close).
 */
export const LINGER = { totalMs: 30_000, idleMs: 5_000 } as const;

const LINGERING = Symbol('lingering');

/**
 * Makes `res` the last answer on its connection when `req`'s body has not been read in full
 * (`Connection: close`), and closes the connection the way RFC 9112 §9.6 asks: once the answer is
 * out, the write side is shut and the rest of the body is read and discarded until it ends, pauses
 * for `LINGER.idleMs` or `LINGER.totalMs` have passed, and only then is the socket closed. Closing
 * with request bytes unread would reset the connection, and the client could lose the answer; not
 * closing would leave the connection stuck behind a body nobody reads. Call it before the head is
 * written. No-op for a request whose body has arrived in full; an answer cut short (`res`
 * destroyed) still closes the socket at once.
 */
export function closeAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  if (req.complete || (req as { [LINGERING]?: true })[LINGERING]) return;
  (req as { [LINGERING]?: true })[LINGERING] = true;
  if (!res.headersSent) res.shouldKeepAlive = false;
  const socket = req.socket;
  if (!socket) return;
  // node:http closes a connection whose last answer is out with socket.destroySoon(); this one
  // lingers first. Used for this socket only, which is closed afterwards in any case.
  socket.destroySoon = function lingerThenClose(this: Socket) {
    if (this.writable) this.end();
    const close = () => {
      clearTimeout(deadline);
      if (this.writableFinished) this.destroy();
      else this.once('finish', () => this.destroy());
    };
    const deadline = setTimeout(() => this.destroy(), LINGER.totalMs);
    deadline.unref();
    this.setTimeout(LINGER.idleMs, () => this.destroy());
    this.once('close', () => clearTimeout(deadline));
    if (req.complete) return close();
    req.once('end', close);
    discard(req);
  };
}

/**
 * Reads and drops whatever arrives of `req`'s body from now on, whoever was reading it before
 * (like node's own IncomingMessage dump, but also for a body someone has started to read).
 */
export function discard(req: IncomingMessage): void {
  req.removeAllListeners('data');
  const drop = () => {
    while (req.read() !== null);
  };
  req.on('readable', drop);
  drop();
}

/**
 * Answers `thrown` on `res` through the one renderer (shared/errors.ts), as the last answer on its
 * connection when `req`'s body is still arriving (`closeAfterAnswer`). An answer already started is
 * cut short instead (a status sent cannot change), unless it is complete.
 */
export function answerError(req: IncomingMessage, res: ServerResponse, thrown: unknown, requestId: string, log?: (line: string) => void): void {
  if (res.headersSent || res.destroyed) {
    if (!res.writableEnded) res.destroy();
    return;
  }
  closeAfterAnswer(req, res);
  writeError(res, thrown, requestId, log);
}

// ---------------------------------------------------------------------------------------------
// Malformed requests
// ---------------------------------------------------------------------------------------------

/** Messages for the parse errors a client can cause (llhttp's codes). */
function clientErrorMessage(code: string | undefined): string {
  switch (code) {
    case 'HPE_INVALID_EOF_STATE':
      return 'the request ended before its body did (the connection was shut before Content-Length bytes or the last chunk arrived)';
    case 'HPE_HEADER_OVERFLOW':
      return 'the request head is too large';
    case 'HPE_INVALID_CONTENT_LENGTH':
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
      return 'the request has an invalid Content-Length';
    case 'HPE_INVALID_TRANSFER_ENCODING':
    case 'HPE_INVALID_CHUNK_SIZE':
      return 'the request has invalid chunked framing';
    default:
      return 'malformed HTTP request';
  }
}

/**
 * Answers what node's parser refuses (a malformed request, a body cut short by the client shutting
 * its side) with the 400 `invalid_request` envelope, `X-Request-Id` and `Connection: close`, instead
 * of node's bare `400 Bad Request`. A request already being answered is left to its handler, which
 * sees its body fail; a request timeout keeps node's own answer (408).
 */
export function answerClientErrors(server: Server, log?: (line: string) => void): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    const code = err.code;
    if (code === 'ERR_HTTP_REQUEST_TIMEOUT' && socket.writable && !inFlight(socket)?.headersSent) {
      socket.end('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n');
      socket.destroySoon();
      return;
    }
    if (!socket.writable || typeof code !== 'string' || !code.startsWith('HPE_')) {
      socket.destroy();
      return;
    }
    const requestId = newRequestId();
    const refused = new ServiceError('invalid_request', clientErrorMessage(code));
    const res = inFlight(socket);
    if (res) {
      // The request was being served (its body failed): answer on its response, which closes the
      // connection once written; the handler sees its request aborted when the socket goes.
      if (res.headersSent) return void socket.destroy();
      // Once the answer is out, the request's body fails for whoever is reading it (a forward
      // upstream is aborted then), and the socket closes.
      res.once('finish', () => res.req.destroy());
      res.shouldKeepAlive = false;
      writeError(res, refused, requestId);
      return;
    }
    log?.(`http: refused a malformed request (${code}) as ${requestId}`);
    // No response object exists for a request node could not parse: the rendered answer is written
    // on the socket itself.
    const { status, headers, body } = renderError(refused, requestId);
    let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n`;
    for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
    socket.write(Buffer.concat([Buffer.from(`${head}connection: close\r\n\r\n`, 'latin1'), body]));
    socket.destroySoon();
  });
}

/** The response being written on `socket`, if a request is in flight there. */
function inFlight(socket: Socket): ServerResponse | undefined {
  return (socket as { _httpMessage?: ServerResponse })._httpMessage;
}

// ---------------------------------------------------------------------------------------------
// Fetch-style handlers
// ---------------------------------------------------------------------------------------------

/**
 * `req`'s body as a web stream, with backpressure. Unlike `Readable.toWeb`, cancelling it does not
 * destroy `req` (which would reset the connection before the refusal could be answered): the rest
 * is discarded instead, and the answer closes the connection (`closeAfterAnswer`). Every chunk is
 * the HTTP parser's own, not a copy: once handed over nothing else reads it, so the consumer may
 * release one that spans its whole buffer (the agent's blob store does, docs/storage.md
 * "Streaming and the byte limit"), and a body costs no garbage beyond the socket's reads.
 */
function bodyStream(req: IncomingMessage): ReadableStream<Uint8Array> {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let done = false;
  const onData = (chunk: Buffer) => {
    controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    if ((controller.desiredSize ?? 0) <= 0) req.pause();
  };
  const stop = () => {
    done = true;
    req.off('data', onData);
  };
  const stream = new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
      },
      pull() {
        req.resume();
      },
      cancel() {
        stop();
        discard(req);
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: req.readableHighWaterMark }),
  );
  req.pause();
  req.on('data', onData);
  req.once('end', () => {
    if (done) return;
    stop();
    controller.close();
  });
  req.once('error', (err) => {
    if (done) return;
    stop();
    controller.error(err);
  });
  return stream;
}

/** True when `req`'s framing carries a body (RFC 9112 §6.3): chunked, or a `Content-Length` above 0. */
function framesBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && !/^0+$/.test(length.trim()));
}

/**
 * Converts a Node request into a web Request (body streamed, never buffered).
 *
 * A GET or HEAD may carry a body (RFC 9110 §9.3.1, §9.3.2), which a web Request refuses at
 * construction; workerd hands a handler one all the same, as `request.body`. So does this: the
 * Request is built without it and its `body` is the request's stream, made when first asked for,
 * so a route that never looks at it sees nothing new. Only `body` carries it (not `text()`,
 * `arrayBuffer()` or `bodyUsed`): the invoke route reads `body`, which is how a GET or HEAD body
 * reaches a function through this entry as through workerd (docs/functions.md "Invoke").
 */
export function toWebRequest(req: IncomingMessage, res: ServerResponse, origin: string): Request {
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
  const method = req.method ?? 'GET';
  const bodiless = method === 'GET' || method === 'HEAD';
  // The path and query of the (origin-form) target on the origin: a path starting `//` stays a
  // path, and a Host header holding a path cannot change this one.
  const url = new URL(origin);
  const target = new URL(`http://target${req.url ?? '/'}`);
  url.pathname = target.pathname;
  url.search = target.search;
  const request = new Request(url, {
    method,
    headers,
    body: bodiless ? undefined : bodyStream(req),
    signal: controller.signal,
    ...(bodiless ? {} : { duplex: 'half' }),
  } as RequestInit);
  if (bodiless && framesBody(req)) {
    let body: ReadableStream<Uint8Array> | undefined;
    Object.defineProperty(request, 'body', { configurable: true, enumerable: true, get: () => (body ??= bodyStream(req)) });
  }
  return request;
}

/**
 * A body declared at most this long (a JSON answer, an error) is read whole and written in one
 * piece once the request has been read: converting it to a Node stream and piping it costs more
 * than the body itself. Not before: an answer given while the request's body is still arriving
 * ends only once that body has been drained (shared/http/linger.ts), and must stream.
 */
const WHOLE_BODY_MAX = 64 * 1024;

const NODE_WRITER = Symbol('node writer');

/** A reason phrase of printable ASCII, as almost every one is. */
const ASCII_REASON = /^[\t\x20-\x7e]*$/;
/** What a reason phrase may hold (RFC 9112 §4: HTAB, SP, VCHAR, obs-text), as node checks it. */
const REASON = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * A received reason phrase as node is to write it (RFC 9112 §4), or undefined for node's standard
 * one when its bytes are unknown. undici decodes the bytes of a reason phrase as UTF-8 (fetch's
 * `statusText`, a dispatch's status message) and node writes the status line as latin1, so
 * non-ASCII text is written as its UTF-8 bytes, which gives back what was received; text holding
 * U+FFFD was bytes that were not UTF-8, which are lost by then.
 */
export function reasonPhrase(text: string | undefined): string | undefined {
  if (text === undefined || ASCII_REASON.test(text)) return text;
  if (text.includes('\ufffd')) return undefined;
  const bytes = Buffer.from(text, 'utf8').toString('latin1');
  return REASON.test(bytes) ? bytes : undefined;
}

/** Writes a body straight onto a Node response: no web stream, no chunk allocated per write. */
export type NodeBodyWriter = (res: ServerResponse) => Promise<void>;

/**
 * A Response whose body the Node listeners of shared/http write with `writer` (the agent's blob
 * reads, host-agent/routes/blobs.ts), on buffers it reuses, rather than through a web stream whose
 * every chunk is a fresh buffer for the garbage collector. `fallback` is the same body as a web
 * stream, for anything else that reads the Response; it must not start reading until pulled.
 */
export function nodeWrittenResponse(status: number, headers: Record<string, string>, writer: NodeBodyWriter, fallback: ReadableStream<Uint8Array>): Response {
  const response = new Response(fallback, { status, headers });
  (response as Response & { [NODE_WRITER]?: NodeBodyWriter })[NODE_WRITER] = writer;
  return response;
}

/** Writes a web Response to a Node response, streaming its body. */
export async function writeWebResponse(response: Response, res: ServerResponse, req?: IncomingMessage): Promise<void> {
  const writer = (response as Response & { [NODE_WRITER]?: NodeBodyWriter })[NODE_WRITER];
  const declared = !writer && response.body && req?.complete ? response.headers.get('content-length') : null;
  const whole = declared !== null && /^\d{1,5}$/.test(declared) && Number(declared) <= WHOLE_BODY_MAX ? new Uint8Array(await response.arrayBuffer()) : null;
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    if (name === 'set-cookie') return;
    headers[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length) headers['set-cookie'] = cookies;
  if (req) closeAfterAnswer(req, res);
  // The status text as given (a function's, relayed); an empty one (every Response made without
  // one, on Node) is node's standard phrase.
  res.writeHead(response.status, response.statusText === '' ? undefined : reasonPhrase(response.statusText), headers);
  if (whole) {
    res.end(whole);
    return;
  }
  if (writer) {
    await writer(res);
    res.end();
    return;
  }
  if (!response.body) {
    res.end();
    return;
  }
  await pipeline(Readable.fromWeb(response.body as never), res);
}

/** Starts serving `handler` on host:port (port 0 picks a free one). */
export async function serveFetch(
  handler: (request: Request) => Promise<Response>,
  { host, port, setting, onError = () => {} }: { host: string; port: number; setting?: string; onError?: (err: unknown) => void },
): Promise<Served> {
  const server = createServer(SERVER_OPTIONS, (req, res) => {
    const refused = badTarget(req);
    if (refused) return answerError(req, res, refused, newRequestId());
    const origin = `http://${targetAuthority(req) ?? req.headers.host ?? `${host}:${port}`}`;
    let request: Request;
    try {
      request = toWebRequest(req, res, origin);
    } catch (err) {
      onError(err);
      return answerError(req, res, new ServiceError('invalid_request', 'malformed request'), newRequestId());
    }
    handler(request)
      .then((response) => writeWebResponse(response, res, req))
      .catch((err) => {
        // A client that went away mid-body is not a server fault.
        if ((err as { code?: string }).code !== 'ERR_STREAM_PREMATURE_CLOSE') onError(err);
        const requestId = newRequestId();
        answerError(req, res, new ServiceError('internal', `internal error (request ${requestId})`), requestId);
      });
  });
  server.keepAliveTimeout = 65_000;
  return startServed(server, host, port, setting);
}

/**
 * Answers `server`'s client errors with the envelope, listens on host:port (`setting` names the
 * port in a busy-port message), and answers it as `Served`: its real port and URL, and a close that
 * also ends idle keep-alive connections.
 */
export async function startServed(server: Server, host: string, port: number, setting?: string): Promise<Served> {
  answerClientErrors(server);
  await listen(server, host, port, setting);
  const actual = (server.address() as AddressInfo).port;
  return {
    server,
    port: actual,
    url: `http://${host}:${actual}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Listens, turning "address in use" into one clear line naming the port. */
export function listen(server: NetServer, host: string, port: number, setting?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') {
        reject(new Error(`port ${port} on ${host} is already in use${setting ? `: set ${setting} to another port` : ''}`));
      } else reject(err);
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}
