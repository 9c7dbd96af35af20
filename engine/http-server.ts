/**
 * The `/v2` loopback HTTP surface (docs/engine.md "HTTP surface"): protocol-minor check, routing, bounded body
 * reading, and the product envelope on every answer, errors included. What touches the database is
 * handed, body and all, to the executor (./executor-link.ts), which runs it within the statement time
 * limit in a process of its own; capabilities are answered here.
 */
import { createServer } from 'node:http';
import type { IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import { ApiError } from './api-error.ts';
import { ENVELOPE_CONTENT_TYPE, encodeEnvelope } from './envelope.ts';
import { DEFAULT_SEARCH_LIMIT, MAX_BATCH_STATEMENTS, MAX_SEARCH_LIMIT, errorJson, type Answer, type RequestKind } from './requests.ts';
import { ENGINE_VERSION, PROTOCOL_MINOR } from './version.ts';

/** What runs the requests that touch the database (./executor-link.ts). */
export interface EngineBackend {
  readonly sqliteVersion: string;
  /** Runs one request on the raw body (or the decoded table name of a drop); never rejects. */
  run(kind: RequestKind, requestId: string, payload: Buffer): Promise<Answer>;
}

/** Settings of the HTTP surface. */
export interface HttpOptions {
  maxBodyBytes: number;
  /** The statement time limit, for capabilities (the executor link enforces it). */
  statementTimeoutMs: number;
  /** How long shutdown waits for in-flight requests before closing their connections. */
  drainMs: number;
  /** Where to log unexpected errors (stderr in production). */
  logError: (message: string) => void;
}

/** The running HTTP surface. */
export interface EngineHttp {
  server: Server;
  /** Stops accepting, lets in-flight requests finish (bounded by drainMs), resolves when all connections closed. */
  shutdown(): Promise<void>;
}

const DISCARD_MAX_BYTES = 16 * 1024 * 1024;
const DISCARD_MAX_MS = 5000;
const FEATURES = ['sql', 'search', 'tables.delete'];
const PROTOCOL_MINOR_HEADER = String(PROTOCOL_MINOR);

let idPool = Buffer.alloc(0);
let idOffset = 0;

/** `req_` + 16 hex, drawn from a pooled CSPRNG buffer so ids stay cheap on the hot path. */
function requestId(): string {
  if (idOffset + 8 > idPool.length) {
    idPool = randomBytes(8 * 512);
    idOffset = 0;
  }
  const id = `req_${idPool.toString('hex', idOffset, idOffset + 8)}`;
  idOffset += 8;
  return id;
}

function send(res: ServerResponse, status: number, id: string, json: string, close: boolean): void {
  if (res.headersSent || res.destroyed) return;
  const body = encodeEnvelope(json);
  const headers: OutgoingHttpHeaders = {
    'content-type': ENVELOPE_CONTENT_TYPE,
    'content-length': body.length,
    'x-svc-protocol-minor': PROTOCOL_MINOR_HEADER,
    'x-svc-request-id': id,
  };
  if (close) headers.connection = 'close';
  res.writeHead(status, headers);
  res.end(body);
}

/** Checks `X-Svc-Protocol-Minor`: an integer 0..3 (docs/engine.md "HTTP surface"). */
function checkProtocolMinor(value: string | string[] | undefined): void {
  if (value === undefined) throw new ApiError('bad_protocol_minor', 'header X-Svc-Protocol-Minor is required (an integer, at most 3)');
  if (typeof value !== 'string' || !/^[0-9]{1,9}$/.test(value)) {
    throw new ApiError('bad_protocol_minor', 'header X-Svc-Protocol-Minor must be one non-negative integer');
  }
  if (Number(value) > PROTOCOL_MINOR) {
    throw new ApiError('bad_protocol_minor', `header X-Svc-Protocol-Minor ${value} is not supported: this engine speaks minor ${PROTOCOL_MINOR}`);
  }
}

/**
 * Reads a body of at most `limit` bytes: refused up front by Content-Length when present, else by
 * counting as it arrives; past the limit nothing more is kept.
 */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const tooLarge = () => new ApiError('payload_too_large', `request body is over the limit of ${limit} bytes`);
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    req.on('data', (chunk: Buffer) => {
      if (settled) return;
      size += chunk.length;
      if (size > limit) {
        settled = true;
        chunks.length = 0;
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (settled) return;
      settled = true;
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    });
    req.on('close', () => {
      if (settled) return;
      settled = true;
      reject(new ApiError('bad_request', 'request body ended early'));
    });
  });
}

/**
 * After an early 413, reads and throws away what the client is still sending, so it gets to read the
 * answer instead of a reset connection, and the connection stays usable. Bounded: past
 * DISCARD_MAX_BYTES or DISCARD_MAX_MS the connection is destroyed instead. Nothing is kept.
 */
function discardRest(req: IncomingMessage): void {
  if (req.complete) return;
  let seen = 0;
  const timer = setTimeout(() => req.socket.destroy(), DISCARD_MAX_MS);
  timer.unref();
  const stop = () => clearTimeout(timer);
  req.on('data', (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > DISCARD_MAX_BYTES) req.socket.destroy();
  });
  req.once('end', stop);
  req.once('close', stop);
  req.resume();
}

/** Builds the HTTP server (not yet listening) over the executor. */
export function createEngineHttp(backend: EngineBackend, options: HttpOptions): EngineHttp {
  const capabilities = JSON.stringify({
    engine_version: ENGINE_VERSION,
    protocol_minor: PROTOCOL_MINOR,
    product: 'svc-engine',
    storage: 'sqlite',
    sqlite_version: backend.sqliteVersion,
    features: FEATURES,
    max_body_bytes: options.maxBodyBytes,
    sql: {
      batch: true,
      max_statements: MAX_BATCH_STATEMENTS,
      named_params: true,
      explicit_transactions: false,
      statement_timeout_ms: options.statementTimeoutMs,
    },
    search: { max_limit: MAX_SEARCH_LIMIT, default_limit: DEFAULT_SEARCH_LIMIT },
  });
  let shuttingDown = false;

  async function route(req: IncomingMessage, id: string, method: string, path: string): Promise<Answer> {
    if (path === '/v2/capabilities') {
      if (method === 'GET') return { status: 200, json: capabilities };
    } else if (path === '/v2/sql') {
      if (method === 'POST') return backend.run('sql', id, await readBody(req, options.maxBodyBytes));
    } else if (path === '/v2/search') {
      if (method === 'POST') return backend.run('search', id, await readBody(req, options.maxBodyBytes));
    } else if (path.startsWith('/v2/tables/')) {
      const raw = path.slice('/v2/tables/'.length);
      if (method === 'DELETE' && raw !== '' && !raw.includes('/')) {
        let name: string;
        try {
          name = decodeURIComponent(raw);
        } catch {
          throw new ApiError('bad_request', 'table name is not valid percent-encoding');
        }
        return backend.run('drop', id, Buffer.from(name, 'utf8'));
      }
    }
    throw new ApiError('not_found', `no route ${method} ${path}`);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const id = requestId();
    // A request that arrives on a kept-alive connection after SIGTERM is refused; ones already
    // running finish normally. Either way the connection closes after the answer.
    const lateArrival = shuttingDown;
    let status = 200;
    let json: string;
    try {
      checkProtocolMinor(req.headers['x-svc-protocol-minor']);
      if (lateArrival) throw new ApiError('shutting_down', 'the engine is stopping');
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      ({ status, json } = await route(req, id, req.method ?? 'GET', q < 0 ? url : url.slice(0, q)));
    } catch (err) {
      if (err instanceof ApiError) {
        status = err.status;
        json = errorJson(err.code, err.message);
        if (err.code === 'payload_too_large') discardRest(req);
      } else {
        options.logError(`${id} ${req.method} ${req.url}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
        status = 500;
        json = errorJson('internal', `internal error (request ${id})`);
      }
    }
    send(res, status, id, json, shuttingDown);
  }

  const server = createServer({ noDelay: true, keepAlive: true, requestTimeout: 60_000, headersTimeout: 30_000 }, (req, res) => {
    void handle(req, res);
  });

  return {
    server,
    shutdown() {
      shuttingDown = true;
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        const timer = setTimeout(() => server.closeAllConnections(), options.drainMs);
        timer.unref();
      });
    },
  };
}
