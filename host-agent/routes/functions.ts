/**
 * Internal function routes of the host agent (docs/functions.md "Inside the host agent"):
 *
 *   PUT    /internal/v1/projects/{id}/functions/{name}?timeout_ms=&memory_mb=&max_concurrency=
 *          body = the module; x-svc-fn-max-bytes, x-svc-fn-length, x-svc-fn-actor, x-svc-fn-origin
 *          → 200 {function, created}
 *   DELETE /internal/v1/projects/{id}/functions/{name}      x-svc-fn-actor → 200 {function}
 *   GET    /internal/v1/projects/{id}/functions/{name}/logs?tail=N → 200 {project, name, lines}
 *   POST   /internal/v1/projects/{id}/function-secrets/changed     → 200 {changed: true}
 *   any    /internal/v1/projects/{id}/functions/{name}/invoke[/{rest}][?query]
 *          x-svc-fn-origin, x-svc-fn-key (a project key to verify) or none (the handlers checked the
 *          owner's session); the client's request: x-svc-fn-h-<name> (each of its headers the
 *          function sees), x-svc-fn-method (its method where the hop's differs), x-svc-fn-body (it
 *          sent a body), x-svc-fn-length (its Content-Length) → the function's answer, streamed
 *
 * Invoke is not served by the fetch-style internal API: it is put in front of it on the raw Node
 * server (`attachInvokeStream`) and hands the request's own stream to the runtime, with the client's
 * request as the function must see it (`invocationRequest`), so no web stream is made per
 * invocation on the agent. It checks the same internal JWT before any work.
 */
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import { parseProjectKey } from '../../shared/auth.ts';
import { functionView } from '../../shared/db/functions.ts';
import { errorResponse, errors, ServiceError } from '../../shared/errors.ts';
import { json, pathParam } from '../../shared/http/body.ts';
import { answerWhileDraining } from '../../shared/http/linger.ts';
import { answerError } from '../../shared/http/node-http.ts';
import { newRequestId } from '../../shared/ids.ts';
import { internalPathPattern, internalPaths, ROUTE_PARAMS } from '../../shared/internal-paths.ts';
import { parseOr400 } from '../../shared/validation.ts';
import {
  deployQuerySchema,
  FUNCTION_CLIENT_HEADER_PREFIX,
  FUNCTION_HEADERS,
  FUNCTION_METHODS,
  functionSeesHeader,
  FUNCTION_LOG_TAIL_DEFAULT,
  functionLogsQuerySchema,
  functionNameSchema,
  settingsOf,
} from '../../shared/schemas/functions.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import { cloudOriginSchema } from '../../shared/schemas/secrets.ts';
import type { AgentContext } from '../context.ts';
import type { InternalRouter } from '../internal-api.ts';
import { intHeader } from './headers.ts';

type Routed = Request & { params: Record<string, string> };

/** `{id}` and `{name}` of a route. */
function target(request: Routed): { projectId: string; name: string } {
  return {
    projectId: pathParam(request.params.id, 'id', projectIdSchema),
    name: pathParam(request.params.name, 'name', functionNameSchema),
  };
}

function header(headers: Headers, name: string): string {
  const value = headers.get(name);
  if (value === null) throw errors.invalid(`${name}: is required`);
  return value;
}

/** Registers the fetch-style function routes. */
export function register(router: InternalRouter): void {
  router.put(internalPaths.function(ROUTE_PARAMS.id, ROUTE_PARAMS.name), async (request, ctx) => {
    try {
      const { projectId, name } = target(request as Routed);
      const url = new URL(request.url);
      const query = Object.fromEntries(url.searchParams);
      const settings = settingsOf(parseOr400(deployQuerySchema, query, 'query'));
      const maxBytes = intHeader(request.headers, FUNCTION_HEADERS.maxBytes);
      if (maxBytes === null) throw errors.invalid(`${FUNCTION_HEADERS.maxBytes}: is required`);
      const { head, created } = await ctx.functions.deploy({
        projectId,
        name,
        settings,
        body: request.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() }),
        length: intHeader(request.headers, FUNCTION_HEADERS.length),
        maxBytes,
        origin: parseOr400(cloudOriginSchema, header(request.headers, FUNCTION_HEADERS.origin), FUNCTION_HEADERS.origin),
        actor: header(request.headers, FUNCTION_HEADERS.actor),
        requestId: request.headers.get('x-request-id') ?? newRequestId(),
      });
      return json({ function: functionView(head), created });
    } catch (err) {
      // Refused before the body ended: the rest is read and discarded while the answer goes out, and
      // the connection is closed after it (as the blob routes do, host-agent/routes/blobs.ts).
      const response = errorResponse(err, request.headers.get('x-request-id') ?? newRequestId(), ctx.log);
      if (!request.body || request.body.locked) return response;
      response.headers.set('connection', 'close');
      return answerWhileDraining(response, request.body);
    }
  });

  router.delete(internalPaths.function(ROUTE_PARAMS.id, ROUTE_PARAMS.name), async (request, ctx) => {
    const { projectId, name } = target(request as Routed);
    const head = await ctx.functions.remove({
      projectId,
      name,
      actor: header(request.headers, FUNCTION_HEADERS.actor),
      requestId: request.headers.get('x-request-id') ?? newRequestId(),
    });
    return json({ function: functionView(head) });
  });

  router.get(internalPaths.functionLogs(ROUTE_PARAMS.id, ROUTE_PARAMS.name), async (request, ctx) => {
    const { projectId, name } = target(request as Routed);
    const query = parseOr400(functionLogsQuerySchema, Object.fromEntries(new URL(request.url).searchParams), 'query');
    const lines = await ctx.functions.logTail(projectId, name, query.tail ?? FUNCTION_LOG_TAIL_DEFAULT);
    return json({ project: projectId, name, lines }, 200, { 'cache-control': 'no-store' });
  });

  router.post(internalPaths.functionSecretsChanged(ROUTE_PARAMS.id), async (request, ctx) => {
    const projectId = pathParam((request as Routed).params.id, 'id', projectIdSchema);
    await request.body?.cancel();
    ctx.functions.secretsChanged(projectId);
    return json({ changed: true });
  });
}

const INVOKE_PATH = internalPathPattern(internalPaths.functionInvoke(ROUTE_PARAMS.id, ROUTE_PARAMS.name), true);

/**
 * Puts the raw invoke route in front of the internal server's other listeners: invocations are
 * answered here, every other request goes on unchanged.
 */
export function attachInvokeStream(server: Server, ctx: AgentContext): void {
  const rest = server.listeners('request') as RequestListener[];
  server.removeAllListeners('request');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const match = INVOKE_PATH.exec(req.url ?? '');
    if (!match) {
      for (const listener of rest) listener.call(server, req, res);
      return;
    }
    const requestId = typeof req.headers['x-request-id'] === 'string' ? req.headers['x-request-id'] : newRequestId();
    invoke(req, res, match, requestId, ctx).catch((thrown: unknown) => {
      if (res.headersSent) ctx.log(`agent: invocation ${requestId} failed after its head: ${(thrown as Error).stack ?? thrown}`);
      answerError(req, res, thrown, requestId, ctx.log);
    });
  });
}

/**
 * Checks the internal JWT of an invocation (host-agent/internal-auth.ts). Its refusal is not the
 * client's credential problem but a deployment fault, and the hop passes answers through: 503.
 */
async function verifiedInternal(ctx: AgentContext, authorization: string | null): Promise<void> {
  try {
    await ctx.internalTokens.check(authorization);
  } catch {
    throw errors.orchestrator(`host agent ${ctx.agentId} refused the internal credential`);
  }
}

async function invoke(req: IncomingMessage, res: ServerResponse, match: RegExpExecArray, requestId: string, ctx: AgentContext): Promise<void> {
  const headers = new Headers();
  for (const name of ['authorization', FUNCTION_HEADERS.key, FUNCTION_HEADERS.origin]) {
    const value = req.headers[name];
    if (typeof value === 'string') headers.set(name, value);
  }
  await verifiedInternal(ctx, headers.get('authorization'));
  const projectId = pathParam(match[1], 'id', projectIdSchema);
  const name = pathParam(match[2], 'name', functionNameSchema);
  const presented = headers.get(FUNCTION_HEADERS.key);
  if (presented !== null) {
    const parsed = parseProjectKey(presented);
    if (!parsed) throw errors.unauthenticated();
    const key = ctx.keyCache.verifyWarm(parsed) ?? (await ctx.keyCache.verify(parsed));
    if (key.projectId !== projectId) throw errors.denied('the project key belongs to another project');
  }
  const origin = parseOr400(cloudOriginSchema, header(headers, FUNCTION_HEADERS.origin), FUNCTION_HEADERS.origin);
  const path = (req.url ?? '').slice(match[0].length);
  const client = invocationRequest(req);
  asSentByTheClient(req, client);
  const input = {
    projectId,
    name,
    ...client,
    path: path === '' || path.startsWith('?') ? `/${path}` : path,
    origin,
    requestId,
  };
  await ctx.functions.invoke(req, res, input);
}

/** The client's request as the function must see it (docs/functions.md "Invoke"), from the hop that carried it. */
export interface InvocationRequest {
  /** The client's method, whatever method the hop used (FUNCTION_HEADERS.method). */
  method: string;
  /**
   * The client's headers the function sees, as flat name/value pairs (lowercase names): those the
   * handlers sent under FUNCTION_CLIENT_HEADER_PREFIX, and nothing of the hop's own.
   */
  headers: string[];
  /** Whether the client sent a body (a `Content-Length` above 0, or chunked), whatever its method. */
  hasBody: boolean;
  /** The client's declared `Content-Length`, or null. */
  length: number | null;
}

/**
 * The client's request from the handlers' hop (docs/functions.md "Inside the host agent"): its
 * method (the mark of FUNCTION_HEADERS.method, else the hop's), its headers (each sent under
 * FUNCTION_CLIENT_HEADER_PREFIX, checked again against what a function never sees), whether it had a
 * body and the length it declared. 400 for a mark or length that is not one.
 */
export function invocationRequest(req: IncomingMessage): InvocationRequest {
  const raw = req.rawHeaders;
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (!name.startsWith(FUNCTION_CLIENT_HEADER_PREFIX)) continue;
    const own = name.slice(FUNCTION_CLIENT_HEADER_PREFIX.length);
    if (own !== '' && functionSeesHeader(own, null)) headers.push(own, raw[i + 1]!);
  }
  const marked = req.headers[FUNCTION_HEADERS.method];
  const method = typeof marked === 'string' ? marked : (req.method ?? 'GET');
  if (!FUNCTION_METHODS.includes(method)) throw errors.invalid(`${FUNCTION_HEADERS.method}: must be one of ${FUNCTION_METHODS.join(', ')}`);
  const length = nodeIntHeader(req, FUNCTION_HEADERS.length);
  const body = req.headers[FUNCTION_HEADERS.body];
  if (body !== undefined && body !== '1') throw errors.invalid(`${FUNCTION_HEADERS.body}: must be 1 when present`);
  return { method, headers, hasBody: body === '1', length };
}

/**
 * Makes `req` itself say what the client sent — its method and exactly the headers the function
 * sees — so that what reads the request rather than the invocation's input finds the client's
 * request too, and nothing of the hop's.
 */
export function asSentByTheClient(req: IncomingMessage, client: InvocationRequest): void {
  req.method = client.method;
  req.rawHeaders = [...client.headers];
  const object: Record<string, string> = Object.create(null);
  for (let i = 0; i < client.headers.length; i += 2) {
    const name = client.headers[i]!;
    object[name] = name in object ? `${object[name]}, ${client.headers[i + 1]}` : client.headers[i + 1]!;
  }
  req.headers = object;
}

/** A non-negative integer header of `req`, or null; 400 when it is not one. */
function nodeIntHeader(req: IncomingMessage, name: string): number | null {
  const raw = req.headers[name];
  if (raw === undefined) return null;
  if (typeof raw !== 'string' || !/^\d{1,15}$/.test(raw)) throw errors.invalid(`${name}: must be a non-negative integer`);
  return Number(raw);
}
