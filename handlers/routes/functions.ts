/**
 * Routes: functions (docs/functions.md; the four `function_*` codes of the contract's "Errors").
 *
 *   PUT    /v0/projects/{id}/functions/{name}            deploy (owner session; the module as raw bytes)
 *   GET    /v0/projects/{id}/functions                   list (paginated)
 *   GET    /v0/projects/{id}/functions/{name}            read
 *   GET    /v0/projects/{id}/functions/{name}/versions   versions, newest first (paginated)
 *   DELETE /v0/projects/{id}/functions/{name}            delete (invocations in flight finish)
 *   GET    /v0/projects/{id}/functions/{name}/logs       the last lines of its console (`tail`)
 *   any    /v0/projects/{id}/functions/{name}/invoke[/{rest}]  invoke (owner session or a project key)
 *
 * The rules are in handlers/domain/functions.ts; the host agent of the project runs the functions.
 */
import type { IRequest } from 'itty-router';
import { parseBearer } from '../../shared/auth.ts';
import { errorResponse, errors, ServiceError } from '../../shared/errors.ts';
import { answerWhileDraining } from '../../shared/http/linger.ts';
import { pageQuerySchema } from '../../shared/schemas/pagination.ts';
import {
  deployQuerySchema,
  FUNCTION_LOG_TAIL_DEFAULT,
  functionLogsQuerySchema,
  functionNameSchema,
  isModuleMediaType,
  MODULE_MEDIA_TYPES,
  settingsOf,
} from '../../shared/schemas/functions.ts';
import { requireOwnedProject, requireProjectForAgent } from '../auth.ts';
import type { Ctx, Routes } from '../context.ts';
import {
  authorizeInvoker,
  deleteFunction,
  deployFunction,
  functionLogs,
  functionVersions,
  invokeFunction,
  listProjectFunctions,
  projectFunction,
  type DeployInput,
} from '../domain/functions.ts';
import { json, noBody, noInput, pathParam, queryOf } from '../http.ts';

const FUNCTIONS_PATH = '/v0/projects/:id/functions';
const FUNCTION_PATH = `${FUNCTIONS_PATH}/:name`;
/** The methods an invocation may use (a preflight is answered by the service, docs/api.md "Browsers and CORS"). */
export const INVOKE_METHODS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'] as const;
/** `…/invoke` with what precedes it, to cut the path remainder from. */
const INVOKE_PREFIX = /^\/v0\/projects\/[^/]+\/functions\/[^/]+\/invoke/;

/** Registers the function routes. */
export function register(router: Routes): void {
  router.put(FUNCTION_PATH, async (request, ctx) => {
    // A refusal before the body is read is answered while the body is drained (shared/http/linger.ts).
    let input: DeployInput;
    try {
      input = await parseDeploy(request, ctx);
    } catch (err) {
      return refuse(request, ctx, err);
    }
    const deployed = await deployFunction(ctx.deps, input);
    return json(deployed.function, deployed.created ? 201 : 200);
  });

  router.get(FUNCTIONS_PATH, async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await listProjectFunctions(ctx.deps, project.id, query);
    return json({ functions: page.items, next_cursor: page.next_cursor });
  });

  router.get(FUNCTION_PATH, async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const name = pathParam(request.params.name, 'name', functionNameSchema);
    await noInput(request);
    return json(await projectFunction(ctx.deps, project.id, name));
  });

  router.get(`${FUNCTION_PATH}/versions`, async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const name = pathParam(request.params.name, 'name', functionNameSchema);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await functionVersions(ctx.deps, project.id, name, query);
    return json({ versions: page.items, next_cursor: page.next_cursor });
  });

  router.delete(FUNCTION_PATH, async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    const name = pathParam(request.params.name, 'name', functionNameSchema);
    await noInput(request);
    return json(await deleteFunction(ctx.deps, { ...owned, requestId: ctx.requestId, accountId: owned.project.owner, name }));
  });

  router.get(`${FUNCTION_PATH}/logs`, async (request, ctx) => {
    const owned = await requireProjectForAgent(request, ctx);
    const name = pathParam(request.params.name, 'name', functionNameSchema);
    const query = queryOf(new URL(request.url), functionLogsQuerySchema);
    await noBody(request);
    const logs = await functionLogs(ctx.deps, { ...owned, requestId: ctx.requestId, name, tail: query.tail ?? FUNCTION_LOG_TAIL_DEFAULT });
    return json(logs, 200, { 'cache-control': 'no-store' });
  });

  for (const method of INVOKE_METHODS) {
    router[method](`${FUNCTION_PATH}/invoke`, invoke);
    router[method](`${FUNCTION_PATH}/invoke/:rest+`, invoke);
  }
}

async function invoke(request: IRequest, ctx: Ctx): Promise<Response> {
  const invoker = await authorizeInvoker(ctx.deps, { token: parseBearer(request.headers), projectIdParam: request.params.id });
  const name = pathParam(request.params.name, 'name', functionNameSchema);
  const url = new URL(request.url);
  const { hasBody, length, body } = await bodyOf(request);
  return invokeFunction(ctx.deps, {
    requestId: ctx.requestId,
    invoker,
    name,
    method: request.method,
    rest: url.pathname.replace(INVOKE_PREFIX, ''),
    search: url.search,
    headers: clientHeaders(request),
    hasBody,
    length,
    body,
    origin: ctx.deps.settings.SVCD_CLOUD_ORIGIN ?? url.origin,
    signal: request.signal,
  });
}

/**
 * Whether the client sent a body — a `Content-Length` above 0, or a chunked one, whatever the method
 * — the length it declared, and the body. A request without either header has a body only when its
 * stream yields a byte: the Node entry gives every request but a GET or HEAD a stream, empty when
 * the client sent nothing (a request made in process declares nothing either). workerd and the Node
 * entry hand a GET's or HEAD's body over as `request.body` (shared/http/node-http.ts `toWebRequest`),
 * though a web Request cannot be made with one; an entry that drops it (the function gateway's
 * events, handlers/gateway.ts) is refused rather than the function given a request without the body
 * the client sent.
 */
export async function bodyOf(request: Request): Promise<{ hasBody: boolean; length: number | null; body: ReadableStream<Uint8Array> | null }> {
  const declared = request.headers.get('content-length')?.trim();
  const chunked = request.headers.has('transfer-encoding');
  const length = !chunked && declared !== undefined && /^\d{1,15}$/.test(declared) ? Number(declared) : null;
  if (chunked || (length !== null && length > 0)) {
    if (request.body === null) throw new ServiceError('not_implemented', `a ${request.method} with a body cannot be invoked through this entry of the service`);
    return { hasBody: true, length, body: request.body };
  }
  if (length !== null || request.body === null) return { hasBody: false, length, body: null };
  const reader = request.body.getReader();
  const first = await reader.read();
  if (first.done) return { hasBody: false, length: null, body: null };
  let pending: Uint8Array | undefined = first.value;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (pending !== undefined) {
        controller.enqueue(pending);
        pending = undefined;
        return;
      }
      const next = await reader.read();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return { hasBody: true, length: null, body };
}

/**
 * The client's headers as it sent them (docs/functions.md "Invoke"), undoing what workerd changes
 * before the handlers see them, which only workerd's requests (those with a `cf` object) need:
 * it replaces `Accept-Encoding` with its own and keeps the client's in `cf.clientAcceptEncoding`
 * (empty when the client sent none, under miniflare), and sets `CF-Connecting-IP` itself.
 */
export function clientHeaders(request: Request): Headers {
  const cf = (request as Request & { cf?: { clientAcceptEncoding?: unknown } | null }).cf;
  if (cf === undefined || cf === null) return request.headers;
  const headers = new Headers(request.headers);
  headers.delete('cf-connecting-ip');
  const acceptEncoding = cf.clientAcceptEncoding;
  if (acceptEncoding === '') headers.delete('accept-encoding');
  else if (typeof acceptEncoding === 'string') headers.set('accept-encoding', acceptEncoding);
  return headers;
}

/** The deploy's input, checked in order (credential, id, ownership, name, query, type, length); none reads the body. */
async function parseDeploy(request: IRequest, ctx: Ctx): Promise<DeployInput> {
  const owned = await requireProjectForAgent(request, ctx);
  const name = pathParam(request.params.name, 'name', functionNameSchema);
  const url = new URL(request.url);
  const settings = settingsOf(queryOf(url, deployQuerySchema));
  if (!isModuleMediaType(request.headers.get('content-type'))) {
    throw errors.invalid(`content-type: must be ${MODULE_MEDIA_TYPES.join(' or ')} (the module's source as raw bytes)`);
  }
  const length = declaredLength(request);
  const maxBytes = ctx.deps.settings.SVCD_FUNCTION_MAX_BYTES;
  // Refused before a byte is read (docs/functions.md "Deploy").
  if (length !== null && length > maxBytes) throw errors.tooLarge(`body: the module exceeds the limit of ${maxBytes} bytes (SVCD_FUNCTION_MAX_BYTES)`);
  return {
    ...owned,
    requestId: ctx.requestId,
    accountId: owned.project.owner,
    name,
    settings,
    body: request.body,
    length,
    origin: ctx.deps.settings.SVCD_CLOUD_ORIGIN ?? url.origin,
    signal: request.signal,
  };
}

/** The request's `Content-Length`, or null when it streams without one; a malformed one is 400. */
function declaredLength(request: Request): number | null {
  const raw = request.headers.get('content-length');
  if (raw === null) return null;
  if (!/^\d{1,16}$/.test(raw.trim())) throw errors.invalid('content-length: must be a non-negative integer');
  return Number(raw.trim());
}

/** Answers a refusal while discarding the unread body, else as any error. */
function refuse(request: Request, ctx: Ctx, err: unknown): Response {
  if (request.body && !request.bodyUsed && !request.body.locked) {
    return answerWhileDraining(errorResponse(err, ctx.requestId, ctx.deps.log), request.body);
  }
  throw err;
}
