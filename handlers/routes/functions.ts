/**
 * Routes: functions (docs/functions.md; the four `function_*` codes of the contract's "Errors";
 * declared in shared/api/functions.ts): deploy (the module as raw bytes), list, read, versions,
 * delete (invocations in flight finish), the last lines of a function's console, and invoke (owner
 * session or a project key, any method, `…/invoke[/{rest}]`). The rules are in
 * handlers/domain/functions.ts; the host agent of the project runs the functions.
 */
import { functions } from '../../shared/api/index.ts';
import { parseBearer } from '../../shared/auth.ts';
import { readBounded } from '../../shared/http/body.ts';
import { errors, ServiceError } from '../../shared/errors.ts';
import { FUNCTION_LOG_TAIL_DEFAULT, isModuleMediaType, MODULE_MEDIA_TYPES, settingsOf } from '../../shared/schemas/functions.ts';
import { requireOwnedProject, requireProjectForAgent } from '../auth.ts';
import type { Ctx } from '../context.ts';
import {
  authorizeInvoker,
  deleteFunction,
  deployFunction,
  functionLogs,
  functionVersions,
  invokeFunction,
  listProjectFunctions,
  projectFunction,
} from '../domain/functions.ts';
import { declaredLength, json } from '../http.ts';
import { implement, type Implementation, type Routed } from '../implement.ts';

/** `…/invoke` with what precedes it, to cut the path remainder from. */
const INVOKE_PREFIX = /^\/v0\/projects\/[^/]+\/functions\/[^/]+\/invoke/;

/** The owner session or a project key of the project (handlers/domain/functions.ts). */
const invoker = (request: Routed, ctx: Ctx) => authorizeInvoker(ctx.deps, { token: parseBearer(request.headers), projectIdParam: request.params.id });

export const implementations: Implementation[] = [
  // Checked in order (credential, id, ownership, name, query, type, length) before a byte is read;
  // a refusal is answered while the body is drained (handlers/implement.ts).
  implement(functions.deploy, requireProjectForAgent, async ({ caller, params, query, request, url }, ctx) => {
    const settings = settingsOf(query);
    if (!isModuleMediaType(request.headers.get('content-type'))) {
      throw errors.invalid(`content-type: must be ${MODULE_MEDIA_TYPES.join(' or ')} (the module's source as raw bytes)`);
    }
    const declared = declaredLength(request);
    const maxBytes = ctx.deps.settings.SVCD_FUNCTION_MAX_BYTES;
    const tooLarge = () => errors.tooLarge(`body: the module exceeds the limit of ${maxBytes} bytes (SVCD_FUNCTION_MAX_BYTES)`);
    // Refused before a byte is read (docs/functions.md "Deploy").
    if (declared !== null && declared > maxBytes) throw tooLarge();
    // Without a length, the module is counted here and refused as soon as the count passes the
    // limit, rather than by the agent once the client has ended the body; it is small enough to
    // hold, and goes on with its exact length: a stream that fails on the way is no safe thing to
    // forward, as workerd ends the chunked body it sends on cleanly (docs/storage.md "Nothing left behind").
    const module = declared === null && request.body ? await moduleWithin(request, maxBytes, tooLarge) : null;
    const deployed = await deployFunction(ctx.deps, {
      ...caller,
      requestId: ctx.requestId,
      accountId: caller.project.owner,
      name: params.name,
      settings,
      body: module ? new Blob([module as Uint8Array<ArrayBuffer>]).stream() : request.body,
      length: module ? module.byteLength : declared,
      origin: ctx.deps.settings.SVCD_CLOUD_ORIGIN ?? url.origin,
      signal: request.signal,
    });
    return json(deployed.function, deployed.created ? 201 : 200);
  }),

  implement(functions.list, requireOwnedProject, async ({ caller, query }, ctx) => {
    const page = await listProjectFunctions(ctx.deps, caller.project.id, query);
    return json({ functions: page.items, next_cursor: page.next_cursor });
  }),

  implement(functions.read, requireOwnedProject, async ({ caller, params }, ctx) => json(await projectFunction(ctx.deps, caller.project.id, params.name))),

  implement(functions.versions, requireOwnedProject, async ({ caller, params, query }, ctx) => {
    const page = await functionVersions(ctx.deps, caller.project.id, params.name, query);
    return json({ versions: page.items, next_cursor: page.next_cursor });
  }),

  implement(functions.remove, requireProjectForAgent, async ({ caller, params }, ctx) =>
    json(await deleteFunction(ctx.deps, { ...caller, requestId: ctx.requestId, accountId: caller.project.owner, name: params.name })),
  ),

  implement(functions.logs, requireProjectForAgent, async ({ caller, params, query }, ctx) => {
    const logs = await functionLogs(ctx.deps, { ...caller, requestId: ctx.requestId, name: params.name, tail: query.tail ?? FUNCTION_LOG_TAIL_DEFAULT });
    return json(logs, 200, { 'cache-control': 'no-store' });
  }),

  ...functions.invoke.map((route) =>
    implement(route, invoker, async ({ caller, params, request, url }, ctx) => {
      const { hasBody, length, body } = await bodyOf(request);
      return invokeFunction(ctx.deps, {
        requestId: ctx.requestId,
        invoker: caller,
        name: params.name,
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
    }),
  ),
];

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

/** A module sent without a length, read whole within `maxBytes`: refused with `tooLarge()` as soon as the count passes it. */
async function moduleWithin(request: Request, maxBytes: number, tooLarge: () => ServiceError): Promise<Uint8Array> {
  try {
    return await readBounded(request, maxBytes);
  } catch (err) {
    throw err instanceof ServiceError && err.code === 'payload_too_large' ? tooLarge() : err;
  }
}
