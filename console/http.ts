/**
 * The one place an error answer the console reads outside the SDK (XMLHttpRequest, tus-js-client)
 * becomes the `SvcError` the SDK throws, so every page shows it the same way (docs/console.md "Pages").
 */
import { SvcError } from '../client/index.ts';

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
