/** A JSON call over HTTP for suites that drive a running service by its base URL. */
import { expect } from 'vitest';
import { checkedJson } from './openapi.ts';

/**
 * Sends `body` as JSON to `base + path` (with a bearer when given), expects 2xx, checks the answer
 * against the service's own OpenAPI document (./openapi.ts), and answers the parsed body.
 */
export async function callJson(base: string, method: string, path: string, auth?: string, body?: unknown): Promise<any> {
  const r = await fetch(`${base}${path}`, {
    method,
    headers: { ...(auth ? { authorization: `Bearer ${auth}` } : {}), 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  expect(r.status, `${method} ${path}`).toBeLessThan(300);
  return checkedJson(base, method, path, r);
}
