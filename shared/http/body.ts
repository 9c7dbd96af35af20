/**
 * Request and answer helpers both HTTP sides use (the handlers and the host agent's internal API):
 * JSON answers, bounded JSON bodies, validated path and query parameters. Web-standard only.
 */
import type { z } from 'zod';
import { errors } from '../errors.ts';
import { fieldName, parseOr400 } from '../validation.ts';
import { smallAnswerEncoding } from './encoding.ts';

/** A JSON response; one under 1 KiB is not compressed (./encoding.ts). */
export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  const bytes = encoder.encode(JSON.stringify(body));
  // Declared, so a Node listener writes it in one piece (shared/http/node-http.ts `writeWebResponse`).
  return new Response(bytes, {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'content-length': String(bytes.byteLength), ...smallAnswerEncoding(bytes.byteLength), ...headers },
  });
}

const encoder = new TextEncoder();

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
  refuseQuery(new URL(request.url));
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

/** Any query parameter is 400 on a route that takes a JSON body and no query (docs/api.md "Decisions"). */
function refuseQuery(url: URL): void {
  for (const name of url.searchParams.keys()) throw errors.invalid(`${fieldName(name)}: is not a known query parameter`);
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
