/**
 * A route as the SDK calls it (docs/sdk.md "How the SDK is made"): the method, pattern and credential
 * of its one declaration in shared/api/, as client/routes.gen.ts holds them (written from the
 * declarations by client/generate-routes.ts), with the declaration itself as a type only: its zod
 * schemas type each call's path parameters, query, JSON body and answer, and nothing of zod reaches
 * the bundle.
 */
import type { z } from 'zod';
import type { Access, BodyInputOf, RouteDecl } from '../shared/api/index.ts';
import type { QueryValue, RouteRequest } from './http.ts';

/** One route: what a request needs at run time, and its declaration's type. */
export interface Site<D extends RouteDecl = RouteDecl> {
  readonly method: D['method'];
  /** The declaration's pattern: `:name` one segment, `:name+` the rest of the path. */
  readonly path: D['path'];
  readonly access: D['access'];
  /** Statuses below 200 or from 300 that the declaration lists as answers, not errors (health's 503, a download's 304). */
  readonly answers: readonly number[];
  /** Type only (never set): the declaration whose schemas type the call. */
  readonly declaration?: D;
}

/** A route of declaration `D` (the generated module's entries: the type checker holds them to `D`'s literals). */
export function site<D extends RouteDecl>(method: D['method'], path: D['path'], access: D['access'], answers: readonly number[] = []): Site<D> {
  return { method, path, access, answers };
}

/** The path parameters of `D`, each as text (encoded here; a `+` parameter is placed as given). */
export type ParamsIn<D extends RouteDecl> = D extends { params: infer P extends Record<string, unknown> } ? { [K in keyof P]: string } : never;

/** The query parameters `D` declares (by name), or any for a forwarded query. */
export type QueryIn<D extends RouteDecl> = D extends { query: infer Q }
  ? Q extends z.ZodObject
    ? { [K in keyof z.input<Q>]?: QueryValue }
    : Record<string, QueryValue>
  : never;

/** The JSON body `D` takes: its schema's input, anything when the body is passed on unchanged, else none. */
export type JsonIn<D extends RouteDecl> = D extends { body: { flow: 'json' } } ? BodyInputOf<D> : D extends { body: { flow: 'stream' } } ? unknown : never;

/** What a call of route `D` sends besides its method, path and credential. */
export interface RouteInput<D extends RouteDecl> {
  params?: ParamsIn<D>;
  query?: QueryIn<D>;
  /** The JSON body, as the declaration's schema takes it (anything for a body passed on unchanged, `/v2`'s). */
  json?: JsonIn<D>;
  /** Bytes or a stream, for a route whose body flows as `bytes` or `stream`. */
  body?: BodyInit | ReadableStream<Uint8Array> | null;
  headers?: Record<string, string>;
  /** Another credential than the declared one: `none` for a request that carries a ticket instead. */
  access?: Access;
  /**
   * The answer's body is a stream read by the caller: the timeout covers the answer's headers only,
   * and no default timeout applies unless the call sets one.
   */
  streaming?: boolean;
  /** Statuses that are answers beside the declared ones (an invocation's: all). */
  accept?: readonly number[];
}

/** The request of route `s` with `input`: its pattern filled, its declared credential and answers. */
export function requestOf<D extends RouteDecl>(s: Site<D>, input: RouteInput<D> = {}): RouteRequest {
  const accept = input.accept ?? (s.answers.length > 0 ? s.answers : undefined);
  return {
    method: s.method,
    path: fill(s.path, (input.params ?? {}) as Record<string, string>),
    ...(input.query ? { query: input.query as Record<string, QueryValue> } : {}),
    ...(input.json !== undefined ? { json: input.json } : {}),
    ...(input.body !== undefined ? { body: input.body } : {}),
    ...(input.headers ? { headers: input.headers } : {}),
    access: input.access ?? s.access,
    ...(input.streaming ? { streaming: true } : {}),
    ...(accept ? { accept } : {}),
  };
}

/** `pattern` with its parameters: `:name` percent-encoded, `:name+` (the rest of the path) as given. */
export function fill(pattern: string, params: Record<string, string>): string {
  return pattern.replace(/:([A-Za-z_][A-Za-z0-9_]*)(\+?)/g, (_, name: string, rest: string) => {
    const value = params[name];
    if (value === undefined) throw new TypeError(`${pattern}: no value for :${name}`);
    return rest ? value : encodeURIComponent(value);
  });
}

/** The route of `sites` declared for `method`, else the first one's path and credential with `method` (the service answers for it). */
export function withMethod<D extends RouteDecl>(sites: readonly Site<D>[], method: string): Site<D> {
  return sites.find((s) => s.method === method) ?? { ...sites[0]!, method: method as D['method'] };
}
