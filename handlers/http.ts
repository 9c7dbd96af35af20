/** Small HTTP helpers of the handlers: JSON answers, bounded JSON bodies, validated path parameters. */
import type { z } from 'zod';
import { errors } from '../shared/errors.ts';
import { parseOr400 } from '../shared/validation.ts';

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
 * Reads a JSON body and validates it. An absent body counts as `{}` only when `optional` is set,
 * so a create without a body is 400 naming the missing field rather than "invalid JSON".
 */
export async function readJson<S extends z.ZodType>(
  request: Request,
  schema: S,
  maxBytes: number,
  { optional = false }: { optional?: boolean } = {},
): Promise<z.output<S>> {
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
  } else if (!optional) {
    value = {};
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

/** Parses the query string with `schema`; single values only unless the schema accepts arrays. */
export function queryOf<S extends z.ZodType>(url: URL, schema: S): z.output<S> {
  const raw: Record<string, string | string[]> = {};
  for (const [k, v] of url.searchParams) {
    const prev = raw[k];
    raw[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return parseOr400(schema, raw, 'query');
}
