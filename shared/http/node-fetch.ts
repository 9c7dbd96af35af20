/**
 * Serves a fetch-style handler (`(Request) => Promise<Response>`) on node:http, streaming both
 * ways: the request body reaches the handler as a web stream, the response body is piped out with
 * backpressure, and a client that disconnects aborts the request's signal. What every node:http
 * listener shares besides (targets, refused bodies, malformed requests) is ./node-http.ts.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ServiceError } from '../errors.ts';
import { newRequestId } from '../ids.ts';
import { isIdentityCoding } from './encoding.ts';
import type { ListenerSource } from './held-listeners.ts';
import { answerError, badTarget, closeAfterAnswer, discard, endAnswer, SERVER_OPTIONS, startServed, targetAuthority, type Served } from './node-http.ts';

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
  // Destroyed without an error before its end (a body cut short, answered by answerClientErrors):
  // the reader must fail, not wait for ever (docs/storage.md "Nothing left behind").
  req.once('close', () => {
    if (done) return;
    stop();
    controller.error(new Error('the request ended before its body did'));
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
    // `identity` only kept an edge from compressing (./encoding.ts): nothing to tell the client.
    if (name === 'set-cookie' || isIdentityCoding(name, value)) return;
    headers[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length) headers['set-cookie'] = cookies;
  if (req) closeAfterAnswer(req, res);
  // The status text as given (a function's, relayed); an empty one (every Response made without
  // one, on Node) is node's standard phrase.
  res.writeHead(response.status, response.statusText === '' ? undefined : reasonPhrase(response.statusText), headers);
  const end = (last?: Uint8Array): void => {
    if (req) endAnswer(req, res, last);
    else if (last === undefined) res.end();
    else res.end(last);
  };
  if (whole) return end(whole);
  if (writer) {
    await writer(res);
    return end();
  }
  if (!response.body) return end();
  // Ended by `end`: an early answer ends once the rest of the body was dropped (closeAfterAnswer).
  await pipeline(Readable.fromWeb(response.body as never), res, { end: false });
  end();
}

/** Starts serving `handler` on host:port (port 0 picks a free one). */
export async function serveFetch(
  handler: (request: Request) => Promise<Response>,
  { host, port, setting, onError = () => {}, held }: { host: string; port: number; setting?: string; onError?: (err: unknown) => void; held?: ListenerSource },
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
  return startServed(server, host, port, setting, held);
}

