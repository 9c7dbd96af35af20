/**
 * How a route module implements a declaration of shared/api/ (docs/api.md "Adding a route"): the
 * declaration says the method, the pattern and the inputs; `implement` parses them in the order
 * every route answers its refusals — the credential first (the implementation's guard), then the
 * path parameters in the pattern's order, the query, the body — and hands the handler typed values.
 * A module never repeats a method, a path or a schema.
 */
import type { IRequest } from 'itty-router';
import type { BodyOf, ParamsOf, QueryOf, RouteDecl } from '../shared/api/index.ts';
import { errorCodeOf, errorResponse } from '../shared/errors.ts';
import { answerWhileDraining } from '../shared/http/linger.ts';
import type { Ctx } from './context.ts';
import { noBody, noQuery, pathParam, queryOf, readJson } from './http.ts';

/** A request as the router hands it over: with its raw (still percent-encoded) path parameters. */
export type Routed = IRequest;

/** The inputs of a request, each parsed once, on first use, by the declaration's schemas. */
export interface Inputs<D extends RouteDecl> {
  readonly url: URL;
  /** The path parameters, decoded and validated in the pattern's order. */
  params(): ParamsOf<D>;
  /** The query: the declaration's schema's output; any parameter is 400 on a route that declares none. */
  query(): QueryOf<D>;
  /** The JSON body, or undefined for a route without one (whose body is refused) or with bytes (left unread). */
  body(): Promise<BodyOf<D>>;
}

/**
 * Who the request comes from, judged before anything else about it (handlers/auth.ts): its result
 * reaches the handler as `caller`. It may ask for inputs first where a route checks them before the
 * credential (a realtime ticket is the credential of the query that carries it).
 */
export type Guard<G, D extends RouteDecl = RouteDecl> = (request: Routed, ctx: Ctx, inputs: Inputs<D>) => Promise<G> | G;

/** What a handler receives: the guard's result and the parsed inputs. */
export interface Call<D extends RouteDecl, G> {
  caller: G;
  params: ParamsOf<D>;
  query: QueryOf<D>;
  body: BodyOf<D>;
  request: Routed;
  url: URL;
}

/** A declaration and the function that serves it. */
export interface Implementation {
  readonly route: RouteDecl;
  serve(request: Routed, ctx: Ctx): Promise<Response>;
}

type Handler<D extends RouteDecl, G> = (call: Call<D, G>, ctx: Ctx) => Promise<Response> | Response;

/** Implements `route` for a caller anyone may be (no credential, or one the handler judges itself). */
export function implement<D extends RouteDecl>(route: D, handle: Handler<D, undefined>): Implementation;
/** Implements `route`: `guard` judges the caller first, then the inputs are parsed, then `handle` runs. */
export function implement<D extends RouteDecl, G>(route: D, guard: Guard<G, D>, handle: Handler<D, G>): Implementation;
export function implement<D extends RouteDecl, G>(route: D, ...args: [Handler<D, undefined>] | [Guard<G, D>, Handler<D, G>]): Implementation {
  const [guard, handle] = (args.length === 1 ? [undefined, args[0]] : args) as [Guard<G, D> | undefined, Handler<D, G>];
  const run = async (request: Routed, ctx: Ctx): Promise<Response> => {
    const inputs = inputsOf(route, request, ctx);
    const caller = guard ? await guard(request, ctx, inputs) : (undefined as G);
    const params = inputs.params();
    const query = inputs.query();
    const body = await inputs.body();
    return handle({ caller, params, query, body, request, url: inputs.url }, ctx);
  };
  // Bytes a refusal leaves unread are drained while it is answered (shared/http/linger.ts).
  const serve = route.body.flow === 'bytes' ? (request: Routed, ctx: Ctx) => run(request, ctx).catch((err: unknown) => refusal(request, ctx, err)) : run;
  return { route, serve };
}

/** The inputs of `request` to `route`, each parsed once. */
function inputsOf<D extends RouteDecl>(route: D, request: Routed, ctx: Ctx): Inputs<D> {
  const url = new URL(request.url);
  let params: ParamsOf<D> | undefined;
  let query: { value: QueryOf<D> } | undefined;
  let body: Promise<BodyOf<D>> | undefined;
  return {
    url,
    params: () => (params ??= parseParams(route, request.params ?? {})),
    query: () => (query ??= { value: parseQuery(route, url) }).value,
    body: () => (body ??= parseBody(route, request, ctx)),
  };
}

function parseParams<D extends RouteDecl>(route: D, raw: Record<string, string>): ParamsOf<D> {
  const out: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(route.params ?? {})) {
    // The rest of a forwarding route's path belongs to whoever it is forwarded to, as sent.
    out[name] = route.query === 'forwarded' && route.path.includes(`:${name}+`) ? raw[name] : pathParam(raw[name], name, schema);
  }
  return out as ParamsOf<D>;
}

function parseQuery<D extends RouteDecl>(route: D, url: URL): QueryOf<D> {
  if (route.ignoresInput) return {} as QueryOf<D>;
  if (route.query === 'forwarded') return url.search as QueryOf<D>;
  if (route.query) return queryOf(url, route.query, { repeatable: route.repeatable }) as QueryOf<D>;
  noQuery(url);
  return {} as QueryOf<D>;
}

async function parseBody<D extends RouteDecl>(route: D, request: Routed, ctx: Ctx): Promise<BodyOf<D>> {
  if (route.ignoresInput) return undefined as BodyOf<D>;
  const { body } = route;
  if (body.flow === 'json') return (await readJson(request, body.schema, ctx.deps.settings.SVCD_JSON_MAX_BYTES)) as BodyOf<D>;
  if (body.flow === 'none') await noBody(request);
  return undefined as BodyOf<D>;
}

/**
 * Answers a refusal of a request that carries bytes: while reading and discarding them when
 * nothing has read them yet (shared/http/linger.ts), else as any error.
 */
export function refusal(request: Request, ctx: Ctx, err: unknown): Response {
  if (request.body && !request.bodyUsed && !request.body.locked) {
    ctx.seen.errorCode = errorCodeOf(err);
    return answerWhileDraining(errorResponse(err, ctx.requestId, ctx.deps.log), request.body);
  }
  throw err;
}
