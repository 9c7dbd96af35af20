/**
 * What the `/v2` listener reads of a request (docs/dataplane.md): its headers in one pass, its
 * bearer credential, its body (small ones whole, others streamed and counted), and the bytes of its
 * connection for the metrics; request ids from a pooled CSPRNG buffer.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { bearerToken } from '../../shared/auth.ts';
import { errors } from '../../shared/errors.ts';
import { connectionTokens, HOP_BY_HOP, isHopByHop } from '../../shared/http/hop-by-hop.ts';

const BYTES_MARK = Symbol('bytes-mark');

/**
 * Bytes read and written on `req`'s connection since the last request on it was observed: the
 * request's share of a kept-alive connection (requests on one connection are served in turn).
 */
export function connectionBytes(req: IncomingMessage): { bytesIn: number; bytesOut: number } {
  const socket = req.socket as IncomingMessage['socket'] & { [BYTES_MARK]?: [number, number] };
  const [read, written] = socket[BYTES_MARK] ?? [0, 0];
  const now: [number, number] = [socket.bytesRead, socket.bytesWritten];
  socket[BYTES_MARK] = now;
  return { bytesIn: now[0] - read, bytesOut: now[1] - written };
}

/**
 * Marks a request one agent forwarded to another (its value: the forwarding agent's id). A request
 * carrying it is never forwarded again, and it never reaches an engine. A load balancer in front of
 * the agents should drop it from client requests (a client that sends it only loses forwarding).
 */
export const FORWARDED_BY = 'x-svc-forwarded-by';

export const PROJECT_REF = /^(?:prj_)?([0-9a-f]{16})$/;

let idPool = Buffer.alloc(0);
let idOffset = 0;

/** `req_` + 16 hex (the format of shared/ids.ts newRequestId), from a pooled CSPRNG buffer: one
 * getrandom call per 512 requests instead of one per request on the hot path. */
export function requestId(): string {
  if (idOffset + 8 > idPool.length) {
    idPool = randomBytes(8 * 512);
    idOffset = 0;
  }
  const id = `req_${idPool.toString('hex', idOffset, idOffset + 8)}`;
  idOffset += 8;
  return id;
}

/** What the listener reads from a request's headers, in one pass over the raw list. */
export interface Scanned {
  authorization: string[];
  projectRefs: string[];
  contentLength: string | undefined;
  chunked: boolean;
  /** `X-Svc-Forwarded-By` values: the request came from another agent. */
  forwardedBy: string[];
  /** `Origin` and `Access-Control-Request-Method`: a browser's request, or its preflight. */
  origin: string | undefined;
  preflightMethod: string | undefined;
  /** Headers for the engine, undici's flat `[name, value, ...]`: no hop-by-hop ones, no credential, no host. */
  forwarded: string[];
}

/**
 * One pass over `rawHeaders` (duplicates kept, which `req.headers` would fold or drop) instead of
 * node's two lazily built header objects: the hot path reads headers once.
 */
export function scan(raw: string[]): Scanned {
  const out: Scanned = {
    authorization: [],
    projectRefs: [],
    contentLength: undefined,
    chunked: false,
    forwardedBy: [],
    origin: undefined,
    preflightMethod: undefined,
    forwarded: [],
  };
  let connection: string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    switch (name) {
      case 'authorization':
        out.authorization.push(value);
        continue;
      case 'x-svc-project':
        out.projectRefs.push(value);
        break;
      case 'content-length':
        out.contentLength = value;
        break;
      case 'transfer-encoding':
        out.chunked = true;
        continue;
      case 'connection':
        (connection ??= []).push(value);
        continue;
      case FORWARDED_BY:
        out.forwardedBy.push(value);
        continue;
      case 'origin':
        out.origin = value;
        break;
      case 'access-control-request-method':
        out.preflightMethod = value;
        break;
      case 'host':
      case 'expect':
        continue;
    }
    if (!HOP_BY_HOP.has(name)) out.forwarded.push(raw[i]!, value);
  }
  const listed = connectionTokens(connection);
  if (listed) {
    // Names listed in Connection are hop-by-hop too; the credential is never one.
    const kept: string[] = [];
    for (let i = 0; i < out.forwarded.length; i += 2) {
      if (!isHopByHop(out.forwarded[i]!.toLowerCase(), listed)) kept.push(out.forwarded[i]!, out.forwarded[i + 1]!);
    }
    out.forwarded = kept;
  }
  return out;
}

/** The bearer token of exactly one Authorization header, by the rules of shared/auth.ts parseBearer. */
export function bearerOf(values: string[]): string {
  if (values.length > 1) throw errors.unauthenticated('the Authorization header must appear exactly once');
  return bearerToken(values.length === 0 ? null : values[0]!);
}

/** Bodies up to this size are taken whole (below node's 16 KiB request buffer, so nothing extra is held). */
export const SMALL_BODY = 8 * 1024;

/**
 * A small body once the whole of it has arrived, read from node's request buffer in one piece;
 * undefined when the client goes away first.
 */
export function arrived(req: IncomingMessage): Promise<Buffer | null | undefined> {
  const take = () => (req.readableLength > 0 ? (req.read() as Buffer) : null);
  if (req.complete) return Promise.resolve(take());
  return new Promise((resolve) => {
    const onReadable = () => {
      if (!req.complete) return;
      cleanup();
      resolve(take());
    };
    const onClose = () => {
      cleanup();
      resolve(undefined);
    };
    const cleanup = () => {
      req.off('readable', onReadable);
      req.off('close', onClose);
    };
    req.on('readable', onReadable);
    req.once('close', onClose);
  });
}

/**
 * The request body as undici reads it. Iterated rather than handed over as a stream because undici
 * destroys a stream body when the upstream fails, which would reset the client's connection before
 * it could be told 502; the iterator leaves `req` alive (`destroyOnReturn: false`). A body of
 * unknown length (chunked) is counted, failing with 413 once it passes `max`.
 */
export async function* bodyOf(req: IncomingMessage, max: number | null): AsyncGenerator<Buffer> {
  let total = 0;
  for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    if (max !== null) {
      total += chunk.byteLength;
      if (total > max) throw errors.tooLarge(`request body exceeds ${max} bytes (SVCD_DATAPLANE_MAX_BYTES)`);
    }
    yield chunk;
  }
}

