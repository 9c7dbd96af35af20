/**
 * The agent's public listener as the local stack's one origin (docs/local-stack.md "One origin"):
 * the supervisor holds `SVCD_PORT` and gives it to the first agent, which serves `/v2` (./v2.ts),
 * realtime subscribe and publish (../realtime/public.ts) and invocations with a project key
 * (../functions/public.ts) itself — one hop, as behind production's load balancer — and relays
 * everything else to the handlers (shared/http/relay.ts), as does a request of those routes that is
 * not this agent's to serve (a project placed on another agent, an owner's session for an
 * invocation). A production agent has no origin: its load balancer routes by path.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Log } from '../../shared/log.ts';
import { answeredErrorCode } from '../../shared/errors.ts';
import { createRelay, type RelayTargets } from '../../shared/http/relay.ts';
import type { CorsPolicy } from '../../shared/http/cors.ts';
import { functions, matchRoute, realtime, type RouteDecl, type RouteMatch } from '../../shared/api/index.ts';

/**
 * A public route the agent serves itself, given the declaration `match` the origin found (and its raw
 * path parameters): false when it does not take the request; `elsewhere` relays it.
 */
export type PublicRoute = (req: IncomingMessage, res: ServerResponse, match: RouteMatch, expectsContinue: boolean, elsewhere: () => void) => boolean;

/** What the origin needs. */
export interface OriginOptions {
  /** The handlers and the agents' metrics listeners. */
  targets: RelayTargets;
  cors: CorsPolicy;
  log: Log;
  /** The public routes the agent serves itself, tried in turn. */
  routes: PublicRoute[];
}

/** The origin's request handling (not `/v2`, which the listener serves first). */
export interface Origin {
  serve(req: IncomingMessage, res: ServerResponse, expectsContinue: boolean): void;
  close(): Promise<void>;
}

/**
 * The declared routes the agent may serve itself at the origin (shared/api/; docs/realtime.md
 * "Through the base URL, locally"; docs/functions.md "The path through the service"): realtime
 * subscribe and publish, and the invocations.
 */
const AGENT_SERVED: ReadonlySet<RouteDecl> = new Set<RouteDecl>([realtime.subscribe, realtime.publish, ...functions.invoke]);

/** The declaration of `method path` (`path` with its query) when the agent may serve it itself, else undefined. */
export function servedAtOrigin(method: string, path: string): RouteMatch | undefined {
  const match = matchRoute(method, path.split('?', 1)[0]!);
  return match !== undefined && AGENT_SERVED.has(match.route) ? match : undefined;
}

/** Creates the origin's handling of every request but `/v2`. */
export function createOrigin({ targets, cors, log, routes }: OriginOptions): Origin {
  const relay = createRelay(targets, { log, name: 'origin', cors });
  return {
    serve(req, res, expectsContinue) {
      const elsewhere = () => {
        // The handlers answer `100 Continue` themselves too: the client may send its body now.
        if (expectsContinue && !res.headersSent) res.writeContinue();
        relay.serve(req, res);
      };
      const match = servedAtOrigin(req.method ?? 'GET', req.url ?? '/');
      if (match) {
        for (const route of routes) if (route(req, res, match, expectsContinue, elsewhere)) return;
      }
      elsewhere();
    },
    close: () => relay.close(),
  };
}

/**
 * The one log line of a public request the agent serves at the origin, written when its answer is
 * done, as the handlers log theirs (docs/observability.md "Logs"): the route's pattern, never the
 * path or the query; the project once `seen` names it.
 */
export function logPublicRequest(log: Log, req: IncomingMessage, res: ServerResponse, requestId: string, route: string, seen: { projectId?: string }): void {
  const started = performance.now();
  res.once('close', () =>
    log('request', {
      level: 'info',
      event: 'request',
      request_id: requestId,
      method: req.method ?? 'GET',
      route,
      status: res.headersSent ? res.statusCode : 0,
      duration_ms: Math.round((performance.now() - started) * 10) / 10,
      ...codeField(res),
      ...(seen.projectId ? { project_id: seen.projectId } : {}),
    }),
  );
}

/** The `code` field of a request line whose answer was the service's refusal. */
function codeField(res: ServerResponse): { code?: string } {
  const code = answeredErrorCode(res);
  return code ? { code } : {};
}
