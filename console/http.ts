/**
 * The console's few calls outside the SDK (docs/console.md "Pages"): a JSON request with the
 * session where the SDK has no method for the body a page sends (the project's settings), and the
 * one place an error answer read some other way (XMLHttpRequest, tus-js-client) becomes the
 * `SvcError` the SDK throws, so every page shows it the same way.
 */
import { SvcError } from '../client/index.ts';
import type { ConsoleSession } from './session.ts';

/** The SvcError of an error answer: its envelope's code and message, else the status alone. */
export function errorOfAnswer(status: number, body: string, requestId: string | null): SvcError {
  let code = status >= 500 ? 'internal' : 'invalid_request';
  let message = `HTTP ${status}`;
  try {
    const e = (JSON.parse(body) as { error: { code: string; message: string } }).error;
    if (typeof e.code === 'string') code = e.code;
    if (typeof e.message === 'string') message = e.message;
  } catch {
    // not an envelope: keep the status
  }
  return new SvcError({ status, code: code as never, message, requestId });
}

/** A JSON request to this origin with the session; answers the parsed body, throws SvcError on an error answer. */
export async function sessionJson<T>(session: ConsoleSession, method: string, path: string, json?: unknown): Promise<T> {
  const answer = await fetch(path, {
    method,
    headers: { authorization: `Bearer ${session.token}`, ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
  });
  const text = await answer.text();
  if (!answer.ok) throw errorOfAnswer(answer.status, text, answer.headers.get('x-request-id'));
  return JSON.parse(text) as T;
}
