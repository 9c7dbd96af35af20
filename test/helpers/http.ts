/** JSON calls over HTTP for suites that drive a running service by its base URL. */
import { expect } from 'vitest';
import { checkedJson } from './openapi.ts';

/** An answer: status, headers, and the body checked against the service's own OpenAPI document. */
export interface CheckedAnswer {
  status: number;
  headers: Headers;
  body: any;
}

/**
 * Sends `body` as JSON to `base + path` (with a bearer when given) and answers the status, the
 * headers and the body, checked against the service's own OpenAPI document (./openapi.ts).
 */
export async function sendJson(base: string, method: string, path: string, auth?: string, body?: unknown): Promise<CheckedAnswer> {
  const headers: Record<string, string> = auth ? { authorization: `Bearer ${auth}` } : {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: r.status, headers: r.headers, body: await checkedJson(base, method, path, r) };
}

/** As `sendJson`, expecting `status` (any 2xx when not given); answers the parsed body. */
export async function callJson(base: string, method: string, path: string, auth?: string, body?: unknown, status?: number): Promise<any> {
  const r = await sendJson(base, method, path, auth, body);
  if (status === undefined) expect(r.status, `${method} ${path}: ${JSON.stringify(r.body)}`).toBeLessThan(300);
  else expect(r.status, `${method} ${path}: ${JSON.stringify(r.body)}`).toBe(status);
  return r.body;
}
