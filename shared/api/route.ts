/**
 * One declaration per public route (docs/api.md "Adding a route"): its method and itty-router
 * pattern, who may call it, its inputs and every answer by status as the zod schemas of
 * shared/schemas/, how its bodies flow and who serves it. The declaration registers the handler
 * (handlers/implement.ts), produces the OpenAPI document (shared/openapi/document.ts), types the SDK,
 * and drives the routing of the local front, the agent's public listener and the deployment
 * template. Web-standard and free of handler code, so browsers and the SDK can import it.
 */
import type { z } from 'zod';

/** The methods a route may declare (a preflight is answered for every path, docs/api.md "Browsers and CORS"). */
export type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';

/** Who may call a route (docs/api.md "Decisions": credentials). */
export type Access =
  /** No credential (health, the document itself, signup, sessions, the console). */
  | 'none'
  /** `Authorization: Bearer <session token>`: the owner of the project. */
  | 'session'
  /** The owner's session or a project key of that project (realtime subscribe and tickets, invocations). */
  | 'session-or-key'
  /** A project key (`/v2`). */
  | 'key';

/** Groups of the reference, in the order docs/api.md lists them. */
export const TAGS = {
  service: 'Health and the API document',
  accounts: 'Accounts and sessions',
  projects: 'Projects',
  lifecycle: 'Lifecycle, snapshots and restore',
  keys: 'Project keys',
  storage: 'Object storage',
  realtime: 'Realtime',
  secrets: 'Function secrets',
  functions: 'Functions',
  receipts: 'Receipts',
  logs: 'Engine logs',
  dataplane: 'Data plane (/v2)',
} as const;

/** A group of the reference. */
export type Tag = keyof typeof TAGS;

/** A body that is not JSON: its media type and what it holds. */
export interface Media {
  type: string;
  description: string;
}

/**
 * How a request's body flows:
 * - `none`: the route takes no body; any byte of one is 400 (docs/api.md "Decisions");
 * - `json`: a JSON object of at most `SVCD_JSON_MAX_BYTES`, validated by `schema`;
 * - `bytes`: raw bytes of a declared media type, streamed to a store (object bytes, a function's module);
 *   a refusal before they are read is answered while they are drained (shared/http/linger.ts);
 * - `stream`: passed on unchanged to whoever answers (an invocation, the `/v2` engine).
 */
export type RequestBody<S extends z.ZodType = z.ZodType> =
  | { flow: 'none' }
  | { flow: 'json'; schema: S; /** an empty body counts as `{}` and may be left out */ optional?: true }
  | { flow: 'bytes' | 'stream'; media: Media };

/**
 * How the success answer's body flows: `json`; `text` (a small body of its own media type, held
 * whole: the console's files); `bytes` (an object's bytes, streamed, any size); `stream` (relayed
 * unchanged, any length and time: an invocation's or the engine's answer); `events` (Server-Sent
 * Events, long-lived); `none` (no body).
 */
export type AnswerFlow = 'none' | 'json' | 'text' | 'bytes' | 'stream' | 'events';

/** One success answer of a route. */
export interface Answer {
  description: string;
  /** A JSON body, by its answer schema. */
  json?: z.ZodType;
  /** A body that is not JSON (beside or instead of `json`). */
  content?: Media;
  /** Headers of the answer beside `X-Request-Id` (which every answer carries), name → description. */
  headers?: Record<string, string>;
}

/**
 * What the query may hold: an object schema naming every parameter (anything else is 400), or
 * `forwarded` (the query belongs to whoever the route passes the request to: an invocation, `/v2`).
 * Left out: the route takes no query, and any parameter is 400.
 */
export type QuerySpec = z.ZodObject | 'forwarded';

/** What a declaration is written with (see `route`). */
export interface RouteSpec {
  method: Method;
  /** The itty-router pattern: `:name` one segment, `:name+` the rest of the path (may hold `/`). */
  path: string;
  tag: Tag;
  summary: string;
  /** Markdown; cite the contract or a docs/ page for the rules. */
  description?: string;
  access: Access;
  /** Path parameters by name, in the pattern's order, each by its schema; a `+` parameter of a forwarding route is passed on undecoded. */
  params?: Record<string, z.ZodType>;
  query?: QuerySpec;
  /** Names in `query` that may be given more than once (their values arrive as an array). */
  repeatable?: readonly string[];
  /** The request body; left out: `{ flow: 'none' }`. */
  body?: RequestBody;
  /**
   * The route reads neither its query nor its body (health, a probe's target; an object path
   * without a key, which is 400 whatever else it holds).
   */
  ignoresInput?: true;
  /** Request headers the route reads, name → description. */
  headers?: Record<string, { description: string; required?: boolean }>;
  /** Success answers by status. */
  answers: Record<number, Answer>;
  /** How the success answer's body flows (default `json` when an answer has a JSON schema, else `none`). */
  answerFlow?: AnswerFlow;
  /**
   * Error statuses beyond those every route of its kind answers (`commonErrors`): each must be a
   * status of an error code (shared/error-codes.ts).
   */
  errors?: readonly number[];
  /** Who serves it: the handlers, or the host agents' `/v2` listeners (the engine's answer passed through unchanged). */
  servedBy?: 'handlers' | 'agent';
}

/** Any route's declaration, as `route` completes it (`Declared` keeps a declaration's own types). */
export interface RouteDecl extends Omit<RouteSpec, 'errors' | 'body' | 'answerFlow' | 'servedBy'> {
  /** `"<METHOD> <pattern>"`: the route's name in logs, the document (`x-svc-route`) and tests. */
  readonly key: string;
  readonly body: RequestBody;
  readonly answerFlow: AnswerFlow;
  /** Every error status it may answer, sorted: `commonErrors` and the declared ones, less its own answers' statuses. */
  readonly errors: readonly number[];
  readonly servedBy: 'handlers' | 'agent';
}

/** The request body of a spec: as declared, else none. */
type BodyOfSpec<S extends RouteSpec> = S extends { body: infer B extends RequestBody } ? B : { flow: 'none' };

/** A declaration with the types of its spec (literal method and path, its own schemas). */
export type Declared<S extends RouteSpec> = Omit<S, 'errors' | 'body' | 'answerFlow' | 'servedBy'> & {
  readonly key: `${S['method']} ${S['path']}`;
  readonly body: BodyOfSpec<S>;
  readonly answerFlow: AnswerFlow;
  readonly errors: readonly number[];
  readonly servedBy: 'handlers' | 'agent';
};

/**
 * The error statuses every route of its kind answers: 400 and 500 always; 401 with a credential;
 * 404 on a route under `/v0/projects/{id}` (unknown or not the caller's); 413 with a JSON body (the
 * `SVCD_JSON_MAX_BYTES` limit).
 */
export function commonErrors(spec: Pick<RouteSpec, 'access' | 'path' | 'body'>): number[] {
  const statuses = [400, 500];
  if (spec.access !== 'none') statuses.push(401);
  if (spec.path.startsWith('/v0/projects/:id')) statuses.push(404);
  if (spec.body?.flow === 'json') statuses.push(413);
  return statuses;
}

/** Declares a route: completes `spec` with its key, body flow, answer flow and every error status. */
export function route<const S extends RouteSpec>(spec: S): Declared<S> {
  const own = new Set(Object.keys(spec.answers).map(Number));
  const errors = [...new Set([...commonErrors(spec), ...(spec.errors ?? [])])].filter((s) => !own.has(s)).sort((a, b) => a - b);
  const jsonAnswer = Object.values(spec.answers).some((a) => a.json);
  return {
    ...spec,
    key: `${spec.method} ${spec.path}`,
    body: spec.body ?? { flow: 'none' },
    answerFlow: spec.answerFlow ?? (jsonAnswer ? 'json' : 'none'),
    errors,
    servedBy: spec.servedBy ?? 'handlers',
  } as unknown as Declared<S>;
}

/** The parameter names of an itty-router pattern, in order. */
export function patternParams(pattern: string): string[] {
  return [...pattern.matchAll(/:([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1]!);
}

/** The typed path parameters of a declaration (each schema's output). */
export type ParamsOf<D extends { params?: Record<string, z.ZodType> }> =
  D['params'] extends Record<string, z.ZodType> ? { [K in keyof D['params']]: z.output<D['params'][K]> } : Record<string, never>;

/** The typed query of a declaration (its schema's output; the raw search string when forwarded). */
export type QueryOf<D extends { query?: QuerySpec }> = D['query'] extends z.ZodObject ? z.output<D['query']> : D['query'] extends 'forwarded' ? string : Record<string, never>;

/** What a client sends as the query of a declaration (its schema's input). */
export type QueryInputOf<D extends { query?: QuerySpec }> = D['query'] extends z.ZodObject ? z.input<D['query']> : never;

/** The typed JSON body of a declaration (its schema's output), or undefined when it takes none or takes bytes. */
export type BodyOf<D extends { body: RequestBody }> = D['body'] extends { flow: 'json'; schema: infer S extends z.ZodType } ? z.output<S> : undefined;

/** What a client sends as the JSON body of a declaration (its schema's input). */
export type BodyInputOf<D extends { body: RequestBody }> = D['body'] extends { flow: 'json'; schema: infer S extends z.ZodType } ? z.input<S> : never;

/** The JSON answer of a declaration with `status` (its schema's output), e.g. `AnswerOf<typeof projects.create, 201>`. */
export type AnswerOf<D extends { answers: Record<number, Answer> }, Status extends keyof D['answers']> = D['answers'][Status] extends {
  json: infer S extends z.ZodType;
}
  ? z.output<S>
  : never;

/** The JSON answers of a declaration, any success status (a union). */
export type AnswersOf<D extends { answers: Record<number, Answer> }> = { [K in keyof D['answers']]: AnswerOf<D, K> }[keyof D['answers']];
