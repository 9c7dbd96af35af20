/**
 * The wire's transport on Node (./wire.ts): undici's `request` on a keep-alive pool of its own. Node's
 * global fetch costs about 0.5 ms more CPU per call (its web-stream body and Response), which a call
 * on every request's path should not pay (docs/performance.md "Control plane"). Node entries only:
 * the workerd bundle keeps fetch.
 */
import { Agent, request } from 'undici';
import type { DbTransport } from './wire.ts';

/** A transport over a keep-alive undici dispatcher of its own. */
export function nodeTransport(): DbTransport {
  const dispatcher = new Agent({ keepAliveTimeout: 30_000 });
  return async (url, { headers, body }) => {
    const answer = await request(url, { method: 'POST', headers, body, dispatcher });
    return { status: answer.statusCode, body: await answer.body.text() };
  };
}
