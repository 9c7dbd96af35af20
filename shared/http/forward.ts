/**
 * Streaming HTTP forwarding over undici (docs/dataplane.md): the request body is piped to the
 * upstream and the answer piped back, both with backpressure and never buffered; hop-by-hop headers
 * are stripped both ways (./hop-by-hop.ts) and the status line passes as the upstream wrote it,
 * reason phrase included; a client that goes away aborts the upstream request.
 * Used by the `/v2` listener and by the local stack's front proxy.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { answerKeepingConnection } from './answer-keeping.ts';
import type { Readable } from 'node:stream';
import type { buildConnector, Dispatcher } from 'undici';
import { isIdentityCoding } from './encoding.ts';
import { connectionTokens, isHopByHop } from './hop-by-hop.ts';
import { closeAfterAnswer, endAnswer, reasonPhrase } from './node-http.ts';

/**
 * The request headers to send upstream, as undici's flat `[name, value, ...]` array built from the
 * client's raw headers (duplicates kept): hop-by-hop ones, `host`, `expect` and every name in
 * `drop` removed.
 */
export function upstreamRequestHeaders(req: IncomingMessage, drop: ReadonlySet<string>): string[] {
  const listed = connectionTokens(req.headers.connection);
  const raw = req.rawHeaders;
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (isHopByHop(name, listed) || name === 'host' || name === 'expect' || drop.has(name)) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

/** What to forward. */
export interface ForwardRequest {
  method: string;
  path: string;
  headers: string[];
  /** The body: bytes already received, a stream or iterator over the client's request, or null. */
  body: Uint8Array | Readable | AsyncIterable<Uint8Array> | null;
  /** Headers added to the answer, as a flat `[name, value, ...]` list (say `x-request-id`). */
  extraResponseHeaders?: readonly string[];
  /** Close the upstream connection after this request instead of returning it to the pool. */
  reset?: boolean;
  /** Rewrites the answer's headers (flat `[name, value, ...]`, hop-by-hop ones already removed) before they are written. */
  answerHeaders?: (statusCode: number, headers: string[]) => string[];
  /** Aborts the upstream request (before its answer began: UpstreamError; after: the answer is cut short). */
  signal?: AbortSignal;
}

/** The upstream failed before any of its answer was sent: the caller still owns the response. */
export class UpstreamError extends Error {
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = 'UpstreamError';
  }
}

/** Why a forwarded request was cut short by the client's side. */
const CLIENT_GONE = 'the client went away';

/**
 * The answer's headers as node's flat `[name, value, ...]` list: hop-by-hop ones removed (with the
 * names a `Connection` header lists) and `Content-Encoding: identity` (the handlers' mark that kept
 * an edge from compressing, ./encoding.ts), repeated headers kept as repeated lines, `extra` appended.
 */
function answerHeaders(headers: IncomingHttpHeaders, extra: readonly string[] | undefined): string[] {
  const listed = connectionTokens(headers.connection);
  const out: string[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || isHopByHop(name, listed) || isIdentityCoding(name, value)) continue;
    if (typeof value === 'string') out.push(name, value);
    else for (const v of value) out.push(name, v);
  }
  if (extra) for (let i = 0; i < extra.length; i++) out.push(extra[i]!);
  return out;
}

/**
 * Forwards `req` to `upstream` and streams the answer into `res`, on undici's dispatch interface
 * (no intermediate stream objects or abort signals per request: this is the `/v2` hot path).
 * Resolves when the answer has been written. Rejects with UpstreamError when the upstream failed
 * before its status line arrived (the caller answers with an error); after that, a failure destroys
 * `res` (the client sees a truncated answer, as a status already sent cannot be changed) and
 * resolves. The client going away aborts the upstream request; a slow client pauses the upstream
 * (backpressure through `res`'s drain).
 *
 * The chunk that completes an answer of declared length is written with the end (the end follows
 * it at once), so a small answer leaves as one write of status, headers and body together; every
 * other chunk is written as it arrives (event streams are never held back).
 */
export function forward(upstream: Dispatcher, req: IncomingMessage, res: ServerResponse, f: ForwardRequest): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const state: Relayed = { controller: null, started: false, held: null, remaining: -1, gone: false };
    const stop = () => {
      state.gone = true;
      state.controller?.abort(new Error(CLIENT_GONE));
    };
    const onClose = () => {
      if (!res.writableFinished) stop();
    };
    const onDrain = () => state.controller?.resume();
    const onAbort = () => state.controller?.abort(new Error('the forwarded request was aborted'));
    const cleanup = () => {
      res.off('close', onClose);
      res.off('drain', onDrain);
      req.off('error', stop);
      f.signal?.removeEventListener('abort', onAbort);
    };
    f.signal?.addEventListener('abort', onAbort);
    res.on('close', onClose);
    res.on('drain', onDrain);
    req.on('error', stop);
    const done = { resolve, reject, cleanup, stop, onAbort };
    upstream.dispatch({ method: f.method, path: f.path, headers: f.headers, body: f.body as never, reset: f.reset }, relayHandler(req, res, f, state, done));
  });
}

/** Where a forwarded request's answer stands. */
interface Relayed {
  controller: Dispatcher.DispatchController | null;
  /** The head has been written to the client. */
  started: boolean;
  /** The chunk that completes an answer of declared length, written with the end. */
  held: Buffer | null;
  /** Bytes of the answer still to come when its length is declared, else -1. */
  remaining: number;
  /** The client went away. */
  gone: boolean;
}

/** undici's dispatch handler that writes the upstream's answer into `res` (see `forward`). */
function relayHandler(
  req: IncomingMessage,
  res: ServerResponse,
  f: ForwardRequest,
  state: Relayed,
  done: { resolve: () => void; reject: (err: unknown) => void; cleanup: () => void; stop: () => void; onAbort: () => void },
): Dispatcher.DispatchHandler {
  return {
    onRequestStart(c) {
      state.controller = c;
      if (state.gone) c.abort(new Error(CLIENT_GONE));
      else if (f.signal?.aborted) done.onAbort();
    },
    onResponseStart(_c, statusCode, headers, statusMessage) {
      if (res.headersSent) {
        // Answered meanwhile by the listener itself (a malformed rest of the request).
        done.stop();
        return;
      }
      // An answer before the whole body arrived (a refusal): the rest of the body may never be
      // read, so the client's connection is closed after it (shared/http/node-http.ts).
      if (!req.complete) closeAfterAnswer(req, res);
      const flat = answerHeaders(headers, f.extraResponseHeaders);
      // The upstream's reason phrase too, empty or not: a relay changes no part of the status line.
      res.writeHead(statusCode, reasonPhrase(statusMessage), f.answerHeaders ? f.answerHeaders(statusCode, flat) : flat);
      state.started = true;
      const length = headers['content-length'];
      if (typeof length === 'string' && /^\d{1,15}$/.test(length)) state.remaining = Number(length);
    },
    onResponseData(c, chunk) {
      if (state.remaining >= 0) {
        state.remaining -= chunk.byteLength;
        if (state.remaining === 0) {
          state.held = chunk;
          return;
        }
      }
      if (!res.write(chunk)) c.pause();
    },
    onResponseEnd() {
      done.cleanup();
      // An early answer ends once the rest of the body was dropped (closeAfterAnswer).
      endAnswer(req, res, state.held ?? undefined);
      state.held = null;
      done.resolve();
    },
    onResponseError(_c, err) {
      done.cleanup();
      state.held = null;
      if (!state.started) return done.reject(new UpstreamError(err));
      res.destroy();
      done.resolve();
    },
  };
}

/**
 * undici's connector (connect timeout `timeoutMs`, to `socketPath` when given) whose connections
 * keep reading after a write failed because the peer reset the connection. A server that answers
 * before reading the whole body and then closes (workerd always does; the 413 of a `/v2` listener
 * or an engine) resets a connection we are still writing to, but its answer has arrived first;
 * node's socket would destroy itself on the write error and throw that answer away unread, and the
 * request would fail as if the server had not answered (docs/dataplane.md "Refused bodies"). Here
 * the failed write simply never completes: nothing more is written, undici reads the answer and
 * finishes the request with it (then drops the connection, as it was still writing), or fails it
 * when the read side ends without one.
 */
export function keepAnswersConnect(timeoutMs: number, socketPath?: string): buildConnector.connector {
  return (options, callback) => {
    const host = options.hostname.replace(/^\[(.*)\]$/, '$1');
    const port = Number(options.port) || (options.protocol === 'https:' ? 443 : 80);
    return answerKeepingConnection(socketPath !== undefined ? { path: socketPath } : { host, port }, timeoutMs, callback as never) as never;
  };
}
