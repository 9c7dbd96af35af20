/**
 * Streaming HTTP forwarding over undici (STYLE "Processes and streams"): the request body is piped
 * to the upstream and the answer piped back, both with backpressure and never buffered; hop-by-hop
 * headers are stripped both ways (RFC 9110 §7.6.1); a client that goes away aborts the upstream
 * request. Used by the `/v2` listener and by the local stack's front proxy.
 */
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';

/** Headers that describe one connection, never the message (RFC 9110 §7.6.1, plus legacy ones). */
export const HOP_BY_HOP = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Names listed in a `Connection` header, which are hop-by-hop too. */
function connectionTokens(value: string | string[] | undefined): Set<string> | null {
  if (value === undefined) return null;
  const out = new Set<string>();
  for (const v of Array.isArray(value) ? value : [value]) {
    for (const t of v.split(',')) {
      const name = t.trim().toLowerCase();
      if (name) out.add(name);
    }
  }
  return out;
}

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
    if (HOP_BY_HOP.has(name) || name === 'host' || name === 'expect' || drop.has(name) || listed?.has(name)) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

/** The upstream's response headers to answer with: hop-by-hop ones removed, everything else kept. */
export function downstreamResponseHeaders(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): OutgoingHttpHeaders {
  const listed = connectionTokens(headers.connection);
  const out: OutgoingHttpHeaders = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || HOP_BY_HOP.has(name) || listed?.has(name)) continue;
    out[name] = value;
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
  /** Headers added to the answer (say `x-request-id`). */
  extraResponseHeaders?: OutgoingHttpHeaders;
}

/** The upstream failed before any of its answer was sent: the caller still owns the response. */
export class UpstreamError extends Error {
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = 'UpstreamError';
  }
}

/**
 * Forwards `req` to `upstream` and streams the answer into `res`. Resolves when the answer has been
 * written. Rejects with UpstreamError when the upstream failed before its status line arrived (the
 * caller answers with an error); after that, a failure destroys `res` (the client sees a truncated
 * answer, as a status already sent cannot be changed) and resolves.
 */
export async function forward(upstream: Dispatcher, req: IncomingMessage, res: ServerResponse, f: ForwardRequest): Promise<void> {
  const abort = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) abort.abort();
  };
  res.once('close', onClose);
  req.once('error', () => abort.abort());
  let started = false;
  try {
    await upstream.stream(
      { method: f.method, path: f.path, headers: f.headers, body: f.body as never, signal: abort.signal },
      ({ statusCode, headers }) => {
        started = true;
        res.writeHead(statusCode, { ...downstreamResponseHeaders(headers), ...f.extraResponseHeaders });
        return res;
      },
    );
  } catch (err) {
    if (!started) throw new UpstreamError(err);
    res.destroy();
  } finally {
    res.off('close', onClose);
  }
}
