/**
 * The handlers application: composes the per-resource route modules (handlers/routes/) and renders
 * every answer and error in one place (shared/errors.ts). `createApp(deps).fetch(request)` is what
 * every entry (miniflare worker, Node server, function gateway) calls.
 */
import { Router } from 'itty-router';
import { HANDLER_ROUTES, refusesTrailingSlash } from '../shared/api/index.ts';
import { errorCodeOf, errorResponse, errors } from '../shared/errors.ts';
import { parseCorsOrigins } from '../shared/http/cors.ts';
import { ID_PATTERNS, newRequestId } from '../shared/ids.ts';
import { corsHeadersFor, preflightAnswer } from './cors.ts';
import type { Ctx, Deps, Routes } from './context.ts';
import type { Implementation } from './implement.ts';
import * as accounts from './routes/accounts.ts';
import * as archive from './routes/archive.ts';
import * as buckets from './routes/buckets.ts';
import * as webConsole from './routes/console.ts';
import * as functions from './routes/functions.ts';
import * as health from './routes/health.ts';
import * as keys from './routes/keys.ts';
import * as lifecycle from './routes/lifecycle.ts';
import * as moves from './routes/moves.ts';
import * as logs from './routes/logs.ts';
import * as objects from './routes/objects.ts';
import * as openapi from './routes/openapi.ts';
import * as projects from './routes/projects.ts';
import * as realtime from './routes/realtime.ts';
import * as receipts from './routes/receipts.ts';
import * as resumable from './routes/resumable.ts';
import * as secrets from './routes/secrets.ts';
import * as tickets from './routes/tickets.ts';

/** Every route module's implementations. Each resource adds its module here (one line). */
export const IMPLEMENTATIONS: readonly Implementation[] = [
  health,
  openapi,
  accounts,
  projects,
  receipts,
  logs,
  realtime,
  secrets,
  functions,
  keys,
  lifecycle,
  archive,
  moves,
  buckets,
  tickets,
  objects,
  resumable,
  webConsole,
].flatMap((m) => m.implementations);

/**
 * The router: every declaration the handlers serve, in the declarations' order (shared/api/index.ts
 * `ROUTES`, the order routes are matched in), each with its implementation. A declaration without
 * one, or an implementation of no declaration, fails the start.
 */
function routerOf(): Routes {
  const byKey = new Map<string, Implementation>();
  for (const impl of IMPLEMENTATIONS) {
    if (byKey.has(impl.route.key)) throw new Error(`handlers: ${impl.route.key} is implemented twice`);
    byKey.set(impl.route.key, impl);
  }
  const router: Routes = Router();
  for (const route of HANDLER_ROUTES) {
    const impl = byKey.get(route.key);
    if (!impl) throw new Error(`handlers: ${route.key} is declared (shared/api/) but not implemented (handlers/routes/)`);
    byKey.delete(route.key);
    (router as unknown as Record<string, (path: string, handler: Implementation['serve']) => void>)[route.method.toLowerCase()]!(route.path, impl.serve);
  }
  if (byKey.size > 0) throw new Error(`handlers: ${[...byKey.keys()].join(', ')} implemented but not declared among the handlers' routes`);
  return router;
}

/** What a worker runtime hands each request beside it: work it must let finish after the answer. */
export interface ExecutionContext {
  waitUntil(task: Promise<unknown>): void;
}

/** The application: one `fetch` that never throws. */
export interface App {
  /** Answers `request`; pass the runtime's execution context where there is one (workerd). */
  fetch(request: Request, exec?: ExecutionContext): Promise<Response>;
  /** Every registered route as [method, path pattern], for tests that must cover them all. */
  routes: [string, string][];
}

/** Every route the handlers serve, as [method, itty-router path pattern]; needs no deps. */
export function routeTable(): [string, string][] {
  return routerOf().routes.map(([method, , , path]) => [String(method), String(path)]);
}

/** Builds the application over `deps`. */
export function createApp(deps: Deps): App {
  const router = routerOf();
  const cors = parseCorsOrigins(deps.settings.SVCD_CORS_ORIGINS);

  return {
    routes: router.routes.map(([method, , , path]) => [String(method), String(path)]),
    async fetch(request: Request, exec?: ExecutionContext): Promise<Response> {
      const requestId = newRequestId();
      const started = performance.now();
      // A preflight carries no credential and is answered for every path (docs/api.md "Browsers and CORS").
      const preflight = preflightAnswer(cors, request);
      if (preflight) return withHeaders(preflight, { 'x-request-id': requestId });
      // Node keeps running what is not awaited; a worker runtime needs to be told.
      const afterAnswer = exec ? (task: Promise<void>) => exec.waitUntil(task) : (task: Promise<void>) => void task;
      const ctx: Ctx = { deps, requestId, afterAnswer, seen: {} };
      let response: Response;
      try {
        refuseTrailingSlash(request);
        const answer = (await router.fetch(request as never, ctx)) as Response | undefined;
        if (!answer) throw errors.notFound(`no route for ${request.method} ${new URL(request.url).pathname}`);
        response = answer;
      } catch (thrown) {
        ctx.seen.errorCode = errorCodeOf(thrown);
        response = errorResponse(thrown, requestId, deps.log);
      }
      logRequest(deps, request, ctx, response.status, started);
      return withHeaders(response, { ...corsHeadersFor(cors, request), 'x-request-id': requestId });
    },
  };
}

/**
 * itty-router matches a pattern with or without a trailing slash, and URL parsing (RFC 3986 §5.2.4)
 * turns `…/replaced/..` into `…/{id}/`: without this, a stray `..` after a project's sub-resource
 * would reach `DELETE /v0/projects/:id`. Which paths may end with one: shared/api/index.ts
 * `refusesTrailingSlash` (docs/api.md "Decisions").
 */
function refuseTrailingSlash(request: Request): void {
  const path = new URL(request.url).pathname;
  if (refusesTrailingSlash(path)) throw errors.notFound(`no route for ${request.method} ${path} (paths do not end with a slash)`);
}

/**
 * The request's one log line (docs/observability.md "Fields"): its route pattern (never the path,
 * which may hold an object key, nor the query, which may hold a ticket), status, the time to the
 * answer's head, the error code of a refusal, and the project and account where known. No header
 * or body is ever logged.
 */
function logRequest(deps: Deps, request: Request, ctx: Ctx, status: number, started: number): void {
  const routed = request as Request & { route?: string; params?: Record<string, string> };
  const projectId = routed.params?.id;
  deps.log('request', {
    level: 'info',
    event: 'request',
    request_id: ctx.requestId,
    method: request.method,
    route: routed.route ?? '(no route)',
    status,
    duration_ms: Math.round((performance.now() - started) * 10) / 10,
    ...(ctx.seen.errorCode ? { code: ctx.seen.errorCode } : {}),
    ...(projectId && ID_PATTERNS.prj.test(projectId) ? { project_id: projectId } : {}),
    ...(ctx.seen.accountId ? { account_id: ctx.seen.accountId } : {}),
  });
}

/** Sets `headers` (`X-Request-Id`, CORS), copying the response when its headers are immutable (a proxied fetch answer). */
function withHeaders(response: Response, headers: Record<string, string>): Response {
  const set = (target: Response) => {
    for (const [name, value] of Object.entries(headers)) {
      if (name === 'vary') target.headers.append(name, value);
      else target.headers.set(name, value);
    }
    return target;
  };
  try {
    return set(response);
  } catch {
    return set(new Response(response.body, response));
  }
}

export type { Deps } from './context.ts';
