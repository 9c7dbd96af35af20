/**
 * What every node:http listener of the service shares (the agent's public and `/v2` listeners, its
 * internal API, the Node entry, the local front): request lines and targets (RFC 9112 §3.2: absolute
 * form accepted, exactly one `Host`, the methods the service knows), a connection closed after an
 * answer given before the body was read (RFC 9112 §9.6, docs/dataplane.md "Refused bodies"), errors
 * answered through the one renderer (`answerError`, shared/errors.ts), malformed requests answered
 * with the error envelope too, and listening on a port of its own or on one the supervisor holds
 * (./held-listeners.ts). Fetch-style handlers on node:http: ./node-fetch.ts.
 */
import { IncomingMessage, ServerResponse, STATUS_CODES, type Server, type ServerOptions } from 'node:http';
import type { AddressInfo, Server as NetServer, Socket } from 'node:net';
import { ServiceError, noteErrorAnswered, renderError, writeError } from '../errors.ts';
import { newRequestId } from '../ids.ts';
import type { ListenerSource } from './held-listeners.ts';

export { nodeWrittenResponse, reasonPhrase, serveFetch, toWebRequest, writeWebResponse, type NodeBodyWriter } from './node-fetch.ts';

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

/** The methods the service's routes use (docs/api.md "Decisions": any other is 501 `not_implemented`). */
const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** How many `Host` field lines `req` carries. */
function hostLines(req: IncomingMessage): number {
  let n = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.length === 4 && req.rawHeaders[i]!.toLowerCase() === 'host') n++;
  return n;
}

/**
 * A ServiceError for a request line or `Host` no route takes, else null (RFC 9112 §3.2): a target
 * that is not origin-form once read (`*`, authority-form) is 400; an HTTP/1.1 request without
 * `Host`, or any with more than one, is 400; a method the service does not know (`M-SEARCH`,
 * `LINK`, …) is 501 `not_implemented` (RFC 9110 §15.6.2; CONNECT: `answerClientErrors`).
 */
export function badTarget(req: IncomingMessage): ServiceError | null {
  const method = req.method ?? 'GET';
  if (!KNOWN_METHODS.has(method)) return new ServiceError('not_implemented', `the method ${method} is not supported: the service's routes use GET, HEAD, POST, PUT, PATCH, DELETE and OPTIONS`);
  if (!(req.url ?? '').startsWith('/')) return new ServiceError('invalid_request', 'the request target must be a path (/v0/...) or an absolute http URL');
  const hosts = hostLines(req);
  if (hosts > 1) return new ServiceError('invalid_request', 'Host: the request carries more than one Host header (RFC 9112 §3.2)');
  if (hosts === 0 && req.httpVersion === '1.1') return new ServiceError('invalid_request', 'Host: an HTTP/1.1 request must carry a Host header (RFC 9112 §3.2)');
  return null;
}

const RESPONSE = Symbol('response');

/**
 * The response class of every listener: each records itself on its socket while it is being
 * written, so a parse error of its request's body (`answerClientErrors`) answers on it.
 */
export class ServiceResponse extends ServerResponse {
  constructor(req: IncomingMessage) {
    super(req);
    const socket = req.socket as Socket & { [RESPONSE]?: ServerResponse };
    socket[RESPONSE] = this;
    this.once('finish', () => {
      if (socket[RESPONSE] === this) socket[RESPONSE] = undefined;
    });
  }
}

/**
 * Server options of every listener: the request and response classes above, and no `Host` check of
 * node's own (a bare 400): `badTarget` answers it with the envelope.
 */
export const SERVER_OPTIONS: ServerOptions = { IncomingMessage: ServiceRequest, ServerResponse: ServiceResponse as typeof ServerResponse, requireHostHeader: false };

// ---------------------------------------------------------------------------------------------
// Answers given before the body was read
// ---------------------------------------------------------------------------------------------

/**
 * How long the rest of a refused body is read and discarded after the answer, at most, and how
 * long it may pause (docs/dataplane.md "Refused bodies"; the figures of a common lingering close).
 */
export const LINGER = { totalMs: 30_000, idleMs: 5_000 } as const;

const LINGERING = Symbol('lingering');

/** True when `req` was answered before its body arrived in full and the rest is still to come. */
function lingering(req: IncomingMessage): boolean {
  return (req as { [LINGERING]?: true })[LINGERING] === true && !req.complete;
}

/**
 * Makes `res` the last answer on its connection when `req`'s body has not been read in full
 * (`Connection: close`), to be ended with `endAnswer`, which closes the connection the way RFC 9112
 * §9.6 asks: once the answer is out, the write side is shut and the rest of the body is read and
 * discarded until it ends, pauses for `LINGER.idleMs` or `LINGER.totalMs` have passed, and only then
 * is the connection closed. Closing with request bytes unread would reset the connection, and the
 * client could lose the answer; not closing would leave the connection stuck behind a body nobody
 * reads. An answer without a length is delimited by the close then (RFC 9112 §6.3), not chunked, so
 * that shutting the write side ends it. Call it before the head is written. No-op for a request
 * whose body has arrived in full.
 */
export function closeAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  if (req.complete || (req as { [LINGERING]?: true })[LINGERING]) return;
  (req as { [LINGERING]?: true })[LINGERING] = true;
  if (res.headersSent) return;
  res.shouldKeepAlive = false;
  res.removeHeader('transfer-encoding');
}

/**
 * Ends `res`, `last` being its last bytes: at once, unless `closeAfterAnswer` made it the last answer
 * on a connection whose request body is still arriving. Then its bytes are written and the write
 * side shut behind them (the client sees the answer end), the rest of the body is read and dropped,
 * and `res` is ended once it has been (or after `LINGER.totalMs`; a connection idle for
 * `LINGER.idleMs` is closed): node:http closes the connection when its last answer ends, and with
 * nothing left unread the close is clean.
 */
export function endAnswer(req: IncomingMessage, res: ServerResponse, last?: Uint8Array | string): void {
  if (!lingering(req) || res.destroyed) {
    if (last === undefined) res.end();
    else res.end(last);
    return;
  }
  const socket = res.socket;
  if (last !== undefined) res.write(last);
  else res.flushHeaders();
  // Queued behind the answer's bytes; only when they are this connection's (not behind another answer).
  if (socket && socket === req.socket) socket.end();
  const finish = () => {
    clearTimeout(deadline);
    req.off('end', finish);
    req.off('close', finish);
    res.off('close', finish);
    if (!res.writableEnded && !res.destroyed) res.end();
  };
  const deadline = setTimeout(finish, LINGER.totalMs);
  deadline.unref();
  // A client that stops sending for `idleMs` is not waited for: its connection goes.
  req.socket?.setTimeout(LINGER.idleMs, () => req.socket.destroy());
  req.once('end', finish);
  req.once('close', finish);
  res.once('close', finish);
  discard(req);
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
  const { status, headers, body } = renderError(thrown, requestId, log);
  noteErrorAnswered(res, thrown);
  res.writeHead(status, headers);
  endAnswer(req, res, body);
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
      socket.end('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n', () => socket.destroy());
      return;
    }
    if (!socket.writable || typeof code !== 'string' || !code.startsWith('HPE_')) {
      socket.destroy();
      return;
    }
    const requestId = newRequestId();
    // A method llhttp does not even know is one the service does not know either (`badTarget`).
    const refused =
      code === 'HPE_INVALID_METHOD'
        ? new ServiceError('not_implemented', 'the method is not supported: the service\'s routes use GET, HEAD, POST, PUT, PATCH, DELETE and OPTIONS')
        : new ServiceError('invalid_request', clientErrorMessage(code));
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
    answerOnSocket(socket, refused, requestId);
  });
  // CONNECT (RFC 9110 §9.3.6) asks for a tunnel, which no listener of the service gives: node hands
  // it here instead of to the request handler, and would otherwise close the connection silently.
  server.on('connect', (req: IncomingMessage, socket: Socket) => {
    socket.on('error', () => {});
    answerOnSocket(socket, new ServiceError('not_implemented', 'the method CONNECT is not supported: the service is no proxy'), newRequestId());
  });
}

/**
 * Writes `refused` rendered (shared/errors.ts) straight onto `socket` and closes it after: for a
 * request node gives no response object (one it could not parse, a CONNECT).
 */
function answerOnSocket(socket: Socket, refused: ServiceError, requestId: string): void {
  const { status, headers, body } = renderError(refused, requestId);
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n`;
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
  socket.end(Buffer.concat([Buffer.from(`${head}connection: close\r\n\r\n`, 'latin1'), body]), () => socket.destroy());
}

/** The response being written on `socket`, if a request is in flight there. */
function inFlight(socket: Socket): ServerResponse | undefined {
  return (socket as Socket & { [RESPONSE]?: ServerResponse })[RESPONSE];
}

/**
 * Answers `server`'s client errors with the envelope, listens on host:port (`setting` names the
 * port in a busy-port message), and answers it as `Served`: its real port and URL, and a close that
 * also ends idle keep-alive connections.
 */
export async function startServed(server: Server, host: string, port: number, setting?: string, held?: ListenerSource): Promise<Served> {
  answerClientErrors(server);
  const actual = await listen(server, host, port, setting, held);
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

/**
 * Listens, turning "address in use" into one clear line naming the port, and answers the port. When
 * the supervisor holds the listener of `setting` (`held`, docs/local-stack.md "Ports"), the server
 * serves that listener's connections instead of binding anything itself.
 */
export function listen(server: NetServer, host: string, port: number, setting?: string, held?: ListenerSource): Promise<number> {
  const heldPort = setting === undefined ? undefined : held?.heldPort(setting);
  if (heldPort !== undefined) {
    held!.attach(setting!, server);
    return Promise.resolve(heldPort);
  }
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') {
        reject(new Error(`port ${port} on ${host} is already in use${setting ? `: set ${setting} to another port` : ''}`));
      } else reject(err);
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
