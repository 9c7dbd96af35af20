/** A JSON call over HTTP for suites that drive a running service by its base URL. */
import { expect } from 'vitest';

/** Sends `body` as JSON to `base + path` (with a bearer when given), expects 2xx, answers the parsed body. */
export async function callJson(base: string, method: string, path: string, auth?: string, body?: unknown): Promise<any> {
  const r = await fetch(`${base}${path}`, {
    method,
    headers: { ...(auth ? { authorization: `Bearer ${auth}` } : {}), 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  expect(r.status, `${method} ${path}`).toBeLessThan(300);
  return r.json();
}
