/**
 * Every public route's declaration (./route.ts), in the order they are matched, and the one
 * matcher the handlers, the local front and the agent's public listener route with
 * (docs/api.md "Adding a route"). Web-standard only.
 */
import * as accounts from './accounts.ts';
import * as dataplane from './dataplane.ts';
import * as functions from './functions.ts';
import * as keys from './keys.ts';
import * as lifecycle from './lifecycle.ts';
import * as logs from './logs.ts';
import * as moves from './moves.ts';
import * as projects from './projects.ts';
import * as realtime from './realtime.ts';
import * as receipts from './receipts.ts';
import type { Method, RouteDecl } from './route.ts';
import * as secrets from './secrets.ts';
import * as service from './service.ts';
import * as storage from './storage.ts';

export { accounts, dataplane, functions, keys, lifecycle, logs, moves, projects, realtime, receipts, secrets, service, storage };
export { commonErrors, patternParams, route, TAGS } from './route.ts';
export type {
  Access,
  Answer,
  AnswerFlow,
  AnswerOf,
  AnswersOf,
  BodyInputOf,
  BodyOf,
  Declared,
  Media,
  Method,
  ParamsOf,
  QueryInputOf,
  QueryOf,
  QuerySpec,
  RequestBody,
  RouteDecl,
  RouteSpec,
  Tag,
} from './route.ts';

/**
 * Every public route, in the order they are matched: the first whose method and pattern fit a
 * request serves it (`…/functions/secrets` before `…/functions/:name`).
 */
export const ROUTES: readonly RouteDecl[] = [
  service.health,
  service.openApi,
  ...accounts.routes,
  ...projects.routes,
  ...receipts.routes,
  ...logs.routes,
  ...realtime.routes,
  ...secrets.routes,
  ...functions.routes,
  ...keys.routes,
  ...lifecycle.routes,
  ...moves.routes,
  ...storage.bucketRoutes,
  ...storage.ticketRoutes,
  ...storage.objectRoutes,
  ...storage.resumableRoutes,
  service.consolePage,
  service.consoleFile,
  ...dataplane.routes,
];

/** The routes the handlers serve (all but the agents' `/v2`). */
export const HANDLER_ROUTES: readonly RouteDecl[] = ROUTES.filter((r) => r.servedBy === 'handlers');

/** A route that fits a request: its declaration and its path parameters, as itty-router gives them (not decoded). */
export interface RouteMatch {
  route: RouteDecl;
  params: Record<string, string>;
}

/**
 * The regular expression itty-router 5 matches a pattern with (its `Router`): `:name` one segment,
 * `:name+` the rest of the path, repeated slashes collapsed, any number of trailing slashes allowed.
 */
export function patternRegExp(pattern: string): RegExp {
  const source = pattern
    .replace(/\/+(\/|$)/g, '$1')
    .replace(/(\/?\.?):(\w+)\+/g, '($1(?<$2>[^]+))')
    .replace(/(\/?\.?):(\w+)/g, '($1(?<$2>[^$1/]+?))')
    .replace(/\./g, '\\.')
    .replace(/(\/?)\*/g, '($1.*)?');
  return new RegExp(`^${source}/*$`);
}

const COMPILED = ROUTES.map((route) => ({ route, re: patternRegExp(route.path) }));

/**
 * The declaration serving `method pathname` (a path without its query), with its parameters; undefined
 * when no route fits (the handlers answer 404). Matches as the handlers' router does, in `ROUTES` order.
 */
export function matchRoute(method: string, pathname: string): RouteMatch | undefined {
  for (const { route, re } of COMPILED) {
    if (route.method !== method) continue;
    const m = re.exec(pathname);
    if (m) return { route, params: { ...m.groups } };
  }
  return undefined;
}

/**
 * The first declaration whose pattern fits `pathname`, whatever its method (the one the handlers
 * would consider), with its parameters; undefined when none does.
 */
export function matchPath(pathname: string): RouteMatch | undefined {
  for (const { route, re } of COMPILED) {
    const m = re.exec(pathname);
    if (m) return { route, params: { ...m.groups } };
  }
  return undefined;
}

/**
 * Whether `pathname` ends with a slash no route takes: none under `/v0` does (docs/api.md
 * "Decisions"), except where the slash belongs to a rest-of-path parameter (an object key may end
 * with one, an S3-style folder marker) or to a path the route forwards (an invocation's). itty-router
 * would match such a path to the route without the slash; the handlers answer 404 instead.
 */
export function refusesTrailingSlash(pathname: string): boolean {
  if (pathname.length <= 1 || !pathname.endsWith('/') || !pathname.startsWith('/v0/')) return false;
  const match = matchPath(pathname);
  return !(match && (match.route.query === 'forwarded' || Object.values(match.params).some((value) => value.endsWith('/'))));
}

/**
 * Whether a route's answer or request body may outlive an ordinary request: an event stream, bytes
 * or a stream either way (object bytes, a function's module, invocations, `/v2`). These are what a
 * function gateway cannot carry and a proxy must not time out.
 */
export function isLongLived(route: RouteDecl): boolean {
  return route.body.flow === 'bytes' || route.body.flow === 'stream' || route.answerFlow === 'bytes' || route.answerFlow === 'stream' || route.answerFlow === 'events';
}
