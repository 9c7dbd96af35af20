/**
 * Small HTTP helpers of the handlers: JSON answers, bounded JSON bodies, validated path and query
 * parameters, and the refusal of input a route does not take.
 */
import { z } from 'zod';
import type { Page } from '../shared/db/pagination.ts';
import { errors } from '../shared/errors.ts';
import type { Ctx } from './context.ts';
import { fieldName, parseOr400 } from '../shared/validation.ts';

/** A JSON response. */
export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  });
}

/**
 * Reads a request body of at most `maxBytes` without ever holding more: refused by
 * `Content-Length` when present and by counting otherwise (413 `payload_too_large`).
 */
export async function readBounded(request: Request, maxBytes: number): Promise<Uint8Array> {
  const declared = request.headers.get('content-length');
  if (declared !== null && /^\d+$/.test(declared) && Number(declared) > maxBytes) {
    throw errors.tooLarge(`body exceeds ${maxBytes} bytes`);
  }
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => {});
      throw errors.tooLarge(`body exceeds ${maxBytes} bytes`);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/**
 * Reads a JSON body and validates it with `schema` (a strict object: unknown fields are 400). The
 * route takes no query parameters, so any is 400 too. An empty body counts as `{}`, so a create
 * without a body is 400 naming the missing field rather than "invalid JSON" (docs/api.md "Decisions").
 */
export async function readJson<S extends z.ZodType>(request: Request, schema: S, maxBytes: number): Promise<z.output<S>> {
  noQuery(new URL(request.url));
  const bytes = await readBounded(request, maxBytes);
  let value: unknown = {};
  if (bytes.byteLength > 0) {
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      throw errors.invalid('body: is not valid UTF-8');
    }
    try {
      value = JSON.parse(text);
    } catch {
      throw errors.invalid('body: is not valid JSON');
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw errors.invalid('body: must be a JSON object');
  }
  return parseOr400(schema, value);
}

/**
 * Refuses a request body on a route that takes none (docs/api.md "Decisions"): a declared length
 * other than 0, a chunked body on a method without one, or any byte of a body stream. Reads at
 * most the first chunk; an empty body is no body.
 */
export async function noBody(request: Request): Promise<void> {
  const declared = request.headers.get('content-length');
  const refuse = () => errors.invalid('body: this route takes no body');
  if (declared !== null && !/^\s*0+\s*$/.test(declared)) throw refuse();
  if (!request.body) {
    // A web Request cannot carry a GET's or HEAD's body; the server that built it keeps its framing.
    if ((request.method === 'GET' || request.method === 'HEAD') && request.headers.has('transfer-encoding')) throw refuse();
    return;
  }
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    if (value.byteLength > 0) {
      await reader.cancel().catch(() => {});
      throw refuse();
    }
  }
}

/** Refuses every query parameter: for routes that take none. */
export function noQuery(url: URL): void {
  queryOf(url, NO_QUERY);
}

/** Refuses any query parameter and any body: for routes whose only input is their path. */
export async function noInput(request: Request): Promise<void> {
  noQuery(new URL(request.url));
  await noBody(request);
}

const NO_QUERY = z.strictObject({});

/** Decodes a path parameter (itty-router leaves them encoded) and validates it; 400 names it. */
export function pathParam<S extends z.ZodType>(raw: string | undefined, name: string, schema: S): z.output<S> {
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw ?? '');
  } catch {
    throw errors.invalid(`${name}: is not valid percent-encoding`);
  }
  return parseOr400(schema, decoded, name);
}

/**
 * Parses the query string with `schema`, an object schema naming every parameter the route knows
 * (docs/api.md "Decisions"): any other parameter is 400, and so is one given twice unless it is
 * `repeatable` (its values then always arrive as an array).
 */
export function queryOf<S extends z.ZodObject>(
  url: URL,
  schema: S,
  { repeatable = [] }: { repeatable?: readonly string[] } = {},
): z.output<S> {
  const known = Object.keys(schema.shape);
  const raw: Record<string, string | string[]> = {};
  for (const [name, value] of url.searchParams) {
    if (!known.includes(name)) throw errors.invalid(`${fieldName(name)}: is not a known query parameter`);
    const prev = raw[name];
    if (repeatable.includes(name)) raw[name] = Array.isArray(prev) ? [...prev, value] : [value];
    else if (prev !== undefined) throw errors.invalid(`${fieldName(name)}: must be given once`);
    else raw[name] = value;
  }
  return parseOr400(schema, raw, 'query');
}

/**
 * One page of a list as answered (docs/api.md "Decisions"): `read` gets the page size (the query's
 * `limit`, else the default) and where to resume, opened from the query's sealed `cursor`; the
 * answer's `next_cursor` is sealed for the same list. `list` names the list (its kind and the ids
 * it is scoped to), so a cursor of another list, project, bucket or account does not open here.
 */
export async function listPage<T>(
  ctx: Ctx,
  list: readonly string[],
  query: { limit?: number | undefined; cursor?: string | undefined },
  read: (limit: number, after: string | undefined) => Promise<Page<T>>,
): Promise<{ items: T[]; next_cursor: string | null }> {
  const { cursors, settings } = ctx.deps;
  const after = query.cursor === undefined ? undefined : await cursors.open(list, query.cursor);
  const page = await read(query.limit ?? settings.SVCD_LIST_LIMIT_DEFAULT, after);
  return { items: page.items, next_cursor: page.nextCursor === null ? null : await cursors.seal(list, page.nextCursor) };
}
