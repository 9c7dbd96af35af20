/**
 * The `/v2` loopback HTTP surface (docs/engine.md "HTTP surface"): protocol-minor check, routing, bounded body
 * reading, and the product envelope on every answer, errors included.
 */
import { createServer } from 'node:http';
import type { IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import { ApiError } from './api-error.ts';
import { ENVELOPE_CONTENT_TYPE, encodeEnvelope } from './envelope.ts';
import type { Executor, StatementInput } from './executor.ts';
import type { Params } from './values.ts';
import { ENGINE_VERSION, PROTOCOL_MINOR } from './version.ts';

/** Settings of the HTTP surface. */
export interface HttpOptions {
  maxBodyBytes: number;
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

export const MAX_SEARCH_LIMIT = 100;
export const DEFAULT_SEARCH_LIMIT = 10;
export const MAX_BATCH_STATEMENTS = 1000;
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

function errorJson(code: string, message: string): string {
  return JSON.stringify({ error: { code, message } });
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

function parseObject(body: Buffer): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    throw new ApiError('bad_request', 'request body is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ApiError('bad_request', 'request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

function rejectUnknownFields(obj: Record<string, unknown>, allowed: readonly string[], where: string): void {
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) throw new ApiError('bad_request', `unknown field ${where}${key}`);
  }
}

function statementInput(value: unknown, where: string): StatementInput {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ApiError('bad_request', `${where.slice(0, -1)} must be an object with sql and params`);
  }
  const obj = value as Record<string, unknown>;
  rejectUnknownFields(obj, where === '' ? ['sql', 'params', 'transaction'] : ['sql', 'params'], where);
  if (typeof obj.sql !== 'string') throw new ApiError('bad_request', `${where}sql must be a string`);
  const params = obj.params;
  if (params === undefined || params === null) return { sql: obj.sql };
  if (typeof params !== 'object') throw new ApiError('bad_request', `${where}params must be an array or an object`);
  return { sql: obj.sql, params: params as Params };
}

/** The statements of a `/v2/sql` body: `{"sql","params"}` or `{"statements":[...],"transaction"?:true}`. */
function sqlStatements(body: Record<string, unknown>): StatementInput[] {
  if (body.transaction !== undefined && body.transaction !== true) {
    throw new ApiError('bad_request', 'transaction must be true: a request always runs in one transaction');
  }
  if (body.statements === undefined) return [statementInput(body, '')];
  rejectUnknownFields(body, ['statements', 'transaction'], '');
  const list = body.statements;
  if (!Array.isArray(list) || list.length === 0) throw new ApiError('bad_request', 'statements must be a non-empty array');
  if (list.length > MAX_BATCH_STATEMENTS) {
    throw new ApiError('bad_request', `statements holds ${list.length} entries; at most ${MAX_BATCH_STATEMENTS}`);
  }
  return list.map((s, i) => statementInput(s, `statements[${i}].`));
}

function searchInput(body: Record<string, unknown>): { table: string; query: string; limit: number } {
  rejectUnknownFields(body, ['table', 'query', 'limit'], '');
  if (typeof body.table !== 'string') throw new ApiError('bad_request', 'table must be a string');
  if (typeof body.query !== 'string' || body.query.trim() === '') throw new ApiError('bad_request', 'query must be a non-empty string');
  const limit = body.limit ?? DEFAULT_SEARCH_LIMIT;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_SEARCH_LIMIT) {
    throw new ApiError('bad_request', `limit must be an integer from 1 to ${MAX_SEARCH_LIMIT}`);
  }
  return { table: body.table, query: body.query, limit };
}

/** Builds the HTTP server (not yet listening) over an executor. */
export function createEngineHttp(executor: Executor, options: HttpOptions): EngineHttp {
  const capabilities = JSON.stringify({
    engine_version: ENGINE_VERSION,
    protocol_minor: PROTOCOL_MINOR,
    product: 'svc-engine',
    storage: 'sqlite',
    sqlite_version: executor.sqliteVersion,
    features: FEATURES,
    max_body_bytes: options.maxBodyBytes,
    sql: { batch: true, max_statements: MAX_BATCH_STATEMENTS, named_params: true, explicit_transactions: false },
    search: { max_limit: MAX_SEARCH_LIMIT, default_limit: DEFAULT_SEARCH_LIMIT },
  });
  let shuttingDown = false;

  async function route(req: IncomingMessage, method: string, path: string): Promise<string> {
    if (path === '/v2/capabilities') {
      if (method === 'GET') return capabilities;
    } else if (path === '/v2/sql') {
      if (method === 'POST') {
        const statements = sqlStatements(parseObject(await readBody(req, options.maxBodyBytes)));
        return JSON.stringify(executor.execute(statements));
      }
    } else if (path === '/v2/search') {
      if (method === 'POST') {
        const input = searchInput(parseObject(await readBody(req, options.maxBodyBytes)));
        return JSON.stringify(executor.search(input.table, input.query, input.limit));
      }
    } else if (path.startsWith('/v2/tables/')) {
      const raw = path.slice('/v2/tables/'.length);
      if (method === 'DELETE' && raw !== '' && !raw.includes('/')) {
        let name: string;
        try {
          name = decodeURIComponent(raw);
        } catch {
          throw new ApiError('bad_request', 'table name is not valid percent-encoding');
        }
        return JSON.stringify(executor.dropTable(name));
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
      json = await route(req, req.method ?? 'GET', q < 0 ? url : url.slice(0, q));
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
