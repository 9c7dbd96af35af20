/**
 * The `/v2` forwarding listener of a host agent (contract "DELETE /v2/{path}", "Authentication" 2–4,
 * "Versioning" 2; DESIGN §3; docs/dataplane.md). Every method on `/v2/...`:
 *
 * 1. exactly one `Authorization: Bearer <project key>` (missing, duplicated, malformed, a session
 *    token, unknown, wrong secret, revoked: 401 with `WWW-Authenticate`);
 * 2. `X-Svc-Project`, when present, must name the key's project (`prj_<16 hex>` or the 16 hex): else 403;
 * 3. a declared body over `SVCD_DATAPLANE_MAX_BYTES` is 413 before anything is forwarded; a body of
 *    unknown length is counted as it streams and cut off at the limit (the engine never sees a
 *    complete over-limit request);
 * 4. the project's engine must be running on this agent: else 409 `tenant_not_running` (never woken);
 * 5. the request is streamed to the engine and its answer streamed back unchanged (status, headers
 *    less hop-by-hop ones, body); an engine gone before answering is 502 `upstream_unavailable`.
 *
 * Errors the service produces carry the error envelope and `X-Request-Id`. A warm request reads
 * nothing from DynamoDB (host-agent/dataplane/key-cache.ts).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseBearer, parseProjectKey } from '../../shared/auth.ts';
import { ServiceError, WWW_AUTHENTICATE, envelopeOf, errors } from '../../shared/errors.ts';
import { newRequestId } from '../../shared/ids.ts';
import { listen } from '../../shared/node-http.ts';
import { forward, upstreamRequestHeaders, UpstreamError } from './forward.ts';
import type { KeyCache } from './key-cache.ts';
import { Upstreams, type EngineEndpoint } from './upstreams.ts';

/** What the listener needs to know about engines: where a project's engine runs, from memory. */
export interface EngineEndpoints {
  liveEndpoint(projectId: string): EngineEndpoint | null;
}

/** Options of the listener. */
export interface DataplaneOptions {
  host: string;
  port: number;
  maxBytes: number;
  endpoints: EngineEndpoints;
  keys: KeyCache;
  log: (line: string) => void;
}

/** A running listener. */
export interface Dataplane {
  server: Server;
  url: string;
  port: number;
  upstreams: Upstreams;
  /** Forgets a project's upstream pool (its engine exited). */
  engineExited(projectId: string): void;
  close(): Promise<void>;
}

/** Request headers never sent to an engine: the credential stays with the service. */
const NOT_FORWARDED = new Set(['authorization']);

const PROJECT_REF = /^(?:prj_)?([0-9a-f]{16})$/;

/** Writes a service error: envelope, `X-Request-Id`, and the challenge on 401. */
function fail(req: IncomingMessage, res: ServerResponse, requestId: string, err: ServiceError): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(envelopeOf(err));
  res.statusCode = err.status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(body));
  res.setHeader('x-request-id', requestId);
  if (err.code === 'authentication_required') res.setHeader('www-authenticate', WWW_AUTHENTICATE);
  // A body still arriving is not read (it may be huge): close the connection after the answer.
  if (!req.complete && hasBody(req)) res.setHeader('connection', 'close');
  res.end(body);
}

function hasBody(req: IncomingMessage): boolean {
  const cl = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (cl !== undefined && cl !== '0');
}

/** The single Authorization header's bearer token (node keeps only the first of duplicates in `headers`). */
function bearerOf(req: IncomingMessage): string {
  const values = req.headersDistinct.authorization;
  if (!values) throw errors.unauthenticated('the Authorization header is missing');
  if (values.length !== 1) throw errors.unauthenticated('the Authorization header must appear exactly once');
  let headers: Headers;
  try {
    headers = new Headers({ authorization: values[0]! });
  } catch {
    throw errors.unauthenticated('the Authorization header must be exactly one "Bearer <token>"');
  }
  return parseBearer(headers);
}

/**
 * The request body as undici reads it. Iterated rather than handed over as a stream because undici
 * destroys a stream body when the upstream fails, which would reset the client's connection before
 * it could be told 502; the iterator leaves `req` alive (`destroyOnReturn: false`). A body of
 * unknown length (chunked) is counted, failing with 413 once it passes `max`.
 */
async function* bodyOf(req: IncomingMessage, max: number | null): AsyncGenerator<Buffer> {
  let total = 0;
  for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    if (max !== null) {
      total += chunk.byteLength;
      if (total > max) throw errors.tooLarge(`request body exceeds ${max} bytes (SVCD_DATAPLANE_MAX_BYTES)`);
    }
    yield chunk;
  }
}

/** Starts the `/v2` listener on host:port (0: a free port). */
export async function startDataplane(options: DataplaneOptions): Promise<Dataplane> {
  const { endpoints, keys, maxBytes, log } = options;
  const upstreams = new Upstreams();

  async function handle(req: IncomingMessage, res: ServerResponse, requestId: string): Promise<void> {
    const path = req.url ?? '';
    if (!(path === '/v2' || path.startsWith('/v2/') || path.startsWith('/v2?'))) {
      throw errors.notFound(`no route for ${req.method} ${path.split('?')[0]}: this listener serves /v2 only`);
    }

    const presented = parseProjectKey(bearerOf(req));
    if (!presented) throw errors.unauthenticated('/v2 takes a project key (svc1_<key_id>_<secret>); a session token is not accepted');
    const { projectId } = await keys.verify(presented);

    const refs = req.headersDistinct['x-svc-project'];
    if (refs !== undefined) {
      const m = refs.length === 1 ? PROJECT_REF.exec(refs[0]!) : null;
      if (!m || `prj_${m[1]}` !== projectId) {
        throw errors.denied('X-Svc-Project does not name the project of this key (expected prj_<16 hex> or the bare 16 hex)');
      }
    }

    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > maxBytes) {
      throw errors.tooLarge(`request body exceeds ${maxBytes} bytes (SVCD_DATAPLANE_MAX_BYTES)`);
    }

    const endpoint = endpoints.liveEndpoint(projectId);
    if (!endpoint) {
      throw new ServiceError('tenant_not_running', `project ${projectId} has no running engine: call POST /v0/projects/${projectId}/wakeup`);
    }

    // Content-Length is enforced by node's parser (never more bytes than declared); only a body
    // without one needs counting.
    const chunked = req.headers['transfer-encoding'] !== undefined;
    const body = chunked ? bodyOf(req, maxBytes) : declared !== undefined && declared !== '0' ? bodyOf(req, null) : null;
    try {
      await forward(upstreams.for(projectId, endpoint), req, res, {
        method: req.method ?? 'GET',
        path,
        headers: upstreamRequestHeaders(req, NOT_FORWARDED),
        body,
        extraResponseHeaders: { 'x-request-id': requestId },
      });
    } catch (err) {
      if (!(err instanceof UpstreamError)) throw err;
      if (err.cause instanceof ServiceError) throw err.cause;
      if (res.destroyed) return; // the client went away: nobody to answer
      log(`dataplane: request ${requestId} to the engine of ${projectId} failed: ${err.message}`);
      throw errors.upstream(`the engine of project ${projectId} did not answer`);
    }
  }

  const server = createServer((req, res) => {
    const requestId = newRequestId();
    handle(req, res, requestId).catch((thrown: unknown) => {
      if (thrown instanceof ServiceError) return fail(req, res, requestId, thrown);
      log(`dataplane: request ${requestId} failed: ${thrown instanceof Error ? (thrown.stack ?? thrown.message) : String(thrown)}`);
      fail(req, res, requestId, new ServiceError('internal', `internal error (request ${requestId})`));
    });
  });
  server.keepAliveTimeout = 65_000;
  await listen(server, options.host, options.port, 'SVCD_DATAPLANE_PORT');
  const port = (server.address() as AddressInfo).port;

  return {
    server,
    port,
    url: `http://${options.host}:${port}`,
    upstreams,
    engineExited: (projectId) => upstreams.drop(projectId),
    async close() {
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await Promise.all([closed, upstreams.close()]);
    },
  };
}
