/**
 * The SDK's one transport (docs/sdk.md "Requests"): builds each request from a route's method and
 * path, adds the credential the route takes, applies the call's timeout and `AbortSignal`, retries
 * idempotent reads with backoff honouring `Retry-After` (RFC 9110 §10.2.3), and turns every error
 * answer into a `SvcError`. Web APIs only: fetch, streams, AbortController.
 */
import type { Access, AnswersOf, RouteDecl } from '../shared/api/index.ts';
import { decodeEnvelope, isProductType } from './envelope.ts';
import { codeOfStatus, isEngineCode, isServiceCode, SvcError } from './errors.ts';
import { requestOf, type RouteInput, type Site } from './site.ts';

/** Options of `createClient`. */
export interface ClientOptions {
  /** The service's base URL, for example `http://127.0.0.1:8787`. */
  baseUrl: string;
  /** A session token (control plane, `/v0`). */
  token?: string;
  /** A project key `svc1_…` (data plane, `/v2`, and realtime subscribe). */
  key?: string;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** Time allowed for a call, headers and JSON body, in ms (default 60000; 0 for none). */
  timeoutMs?: number;
  /** Retries of an idempotent read after a network failure, 429, 502, 503 or 504 (default 2). */
  retries?: number;
}

/** What every method takes last. */
export interface CallOptions {
  /** Aborts the call; the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Overrides the client's `timeoutMs` for this call. */
  timeoutMs?: number;
}

/** A query value as sent: a list goes as the parameter repeated. */
export type QueryValue = string | number | boolean | readonly string[] | undefined;

/** One request of a route (`requestOf` makes it from the route's declaration). */
export interface RouteRequest {
  method: string;
  path: string;
  query?: Record<string, QueryValue>;
  /** A JSON body (serialised here), or raw bytes. */
  json?: unknown;
  body?: BodyInit | ReadableStream<Uint8Array> | null;
  headers?: Record<string, string>;
  /** The credential it carries, as its declaration says (docs/api.md "Decisions": credentials). */
  access: Access;
  /**
   * The answer's body is a stream read by the caller: the timeout covers the answer's headers only,
   * and no default timeout applies unless the call sets one.
   */
  streaming?: boolean;
  /** Statuses that are answers, not errors (health's 503). */
  accept?: readonly number[];
}

const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_RETRIES = 2;
const RETRY_STATUSES = new Set([429, 502, 503, 504]);
/** Longest wait between two attempts, whatever `Retry-After` asks for. */
const MAX_RETRY_WAIT_MS = 30_000;

/** An answer with its cleanup: `done()` stops the timeout clock and detaches the caller's signal. */
export interface Answer {
  response: Response;
  done(): void;
}

/** The transport a client's methods share. */
export class Transport {
  readonly baseUrl: string;
  readonly options: Readonly<ClientOptions>;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions) {
    if (typeof options.baseUrl !== 'string' || !URL.canParse(options.baseUrl) || !/^https?:$/.test(new URL(options.baseUrl).protocol)) {
      throw new TypeError(`baseUrl: must be an absolute URL such as http://127.0.0.1:8787 (got ${JSON.stringify(options.baseUrl)})`);
    }
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.options = options;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== 'function') throw new TypeError('fetch: no fetch available; pass one in createClient({ fetch })');
    // Bound, so a browser's window.fetch is not called with another `this`.
    this.#fetch = f.bind(globalThis);
  }

  /** The absolute URL of `path` with `query`. */
  url(path: string, query?: RouteRequest['query']): string {
    const url = new URL(this.baseUrl + path);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value === undefined) continue;
      if (Array.isArray(value)) for (const v of value) url.searchParams.append(name, v);
      else url.searchParams.set(name, String(value));
    }
    return url.toString();
  }

  /** Sends `req`, retrying an idempotent read; answers a 2xx (or accepted) response, else throws. */
  async send(req: RouteRequest, call: CallOptions = {}): Promise<Answer> {
    const idempotent = req.method === 'GET' || req.method === 'HEAD';
    const retries = idempotent ? Math.max(0, this.options.retries ?? DEFAULT_RETRIES) : 0;
    const credential = this.#credential(req);
    for (let attempt = 0; ; attempt++) {
      let answer: Answer;
      try {
        answer = await this.#once(req, credential, call);
      } catch (err) {
        if (attempt < retries && isNetworkError(err) && !call.signal?.aborted) {
          await sleep(backoffMs(attempt), call.signal);
          continue;
        }
        throw err;
      }
      const { response } = answer;
      if (response.ok || req.accept?.includes(response.status)) return answer;
      try {
        const error = await errorOf(response);
        if (attempt < retries && RETRY_STATUSES.has(response.status)) {
          await sleep(error.retryAfter !== null ? Math.min(error.retryAfter * 1000, MAX_RETRY_WAIT_MS) : backoffMs(attempt), call.signal);
          continue;
        }
        throw error;
      } finally {
        answer.done();
      }
    }
  }

  /** Sends `req` and parses its JSON answer. */
  async json<T>(req: RouteRequest, call: CallOptions = {}): Promise<T> {
    const answer = await this.send(req, call);
    try {
      return (await answer.response.json()) as T;
    } finally {
      answer.done();
    }
  }

  /** Sends route `site` with `input` and parses its JSON answer, typed by the route's declaration. */
  call<D extends RouteDecl>(site: Site<D>, input: RouteInput<D>, call?: CallOptions): Promise<AnswersOf<D>> {
    return this.json<AnswersOf<D>>(requestOf(site, input), call);
  }

  /** Sends route `site` with `input`; answers its response for the caller to read (see `send`). */
  open<D extends RouteDecl>(site: Site<D>, input: RouteInput<D>, call?: CallOptions): Promise<Answer> {
    return this.send(requestOf(site, input), call);
  }

  async #once(req: RouteRequest, credential: string | undefined, call: CallOptions): Promise<Answer> {
    const headers = new Headers(req.headers);
    if (credential) headers.set('authorization', `Bearer ${credential}`);
    let body: BodyInit | ReadableStream<Uint8Array> | null | undefined = req.body;
    if (req.json !== undefined) {
      body = JSON.stringify(req.json);
      headers.set('content-type', 'application/json');
    }
    const timeoutMs = call.timeoutMs ?? (req.streaming ? 0 : (this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS));
    const { signal, stopClock, done } = linkedSignal(call.signal, timeoutMs);
    const init: RequestInit & { duplex?: 'half' } = { method: req.method, headers, body: body as BodyInit | null | undefined, signal };
    // A stream body needs half-duplex in fetch (WHATWG Fetch "duplex").
    if (body instanceof ReadableStream) init.duplex = 'half';
    // A request with a body never follows a redirect (a 307 or 308 would have to send it again, and a
    // stream cannot be); with "follow", Node's fetch (undici before 8) also keeps a copy of every
    // chunk of a streamed body for that case, holding a whole upload in memory.
    if (body !== undefined && body !== null) init.redirect = 'error';
    let response: Response;
    try {
      response = await this.#fetch(this.url(req.path, req.query), init);
    } catch (err) {
      done();
      throw signal.aborted ? signal.reason : err;
    }
    // A streamed body is the caller's to read for as long as it likes; the call's signal still aborts it.
    if (req.streaming) stopClock();
    return { response, done };
  }

  #credential(req: RouteRequest): string | undefined {
    const { token, key } = this.options;
    switch (req.access) {
      case 'none':
        return undefined;
      case 'session':
        if (!token) throw new TypeError(`${req.method} ${req.path} needs a session token: createClient({ baseUrl, token })`);
        return token;
      case 'key':
        if (!key) throw new TypeError(`${req.method} ${req.path} needs a project key: createClient({ baseUrl, key })`);
        return key;
      case 'session-or-key':
        if (!key && !token) throw new TypeError(`${req.method} ${req.path} needs a project key or a session token`);
        return key ?? token;
    }
  }
}

/** A `SvcError` from an error answer: the service's envelope, the engine's, or its status alone. */
export async function errorOf(response: Response): Promise<SvcError> {
  const status = response.status;
  const requestId = response.headers.get('x-request-id');
  const retryAfter = retryAfterOf(response.headers.get('retry-after'));
  const contentType = response.headers.get('content-type');
  let raw: Uint8Array;
  try {
    raw = new Uint8Array(await response.arrayBuffer());
  } catch {
    raw = new Uint8Array();
  }
  if (isProductType(contentType)) {
    try {
      const body = decodeEnvelope(raw) as { error?: { code?: unknown; message?: unknown } };
      const code = body?.error?.code;
      return new SvcError({
        status,
        code: isEngineCode(code) || isServiceCode(code) ? code : codeOfStatus(status),
        message: typeof body?.error?.message === 'string' ? body.error.message : `the engine answered ${status}`,
        requestId,
        source: 'engine',
        engineRequestId: response.headers.get('x-svc-request-id'),
        retryAfter,
      });
    } catch {
      // Not an envelope after all: judged by its status below.
    }
  }
  const text = new TextDecoder().decode(raw);
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (isServiceCode(body?.error?.code) && typeof body.error.message === 'string') {
      return new SvcError({ status, code: body.error.code, message: body.error.message, requestId, retryAfter });
    }
  } catch {
    // Not JSON: a proxy's page, say.
  }
  const excerpt = text.replace(/\s+/g, ' ').trim().slice(0, 120);
  return new SvcError({
    status,
    code: codeOfStatus(status),
    message: `unexpected answer ${status}${contentType ? ` (${contentType})` : ''}${excerpt ? `: ${excerpt}` : ''}`,
    requestId,
    retryAfter,
  });
}

/** Seconds of a `Retry-After` header: delay-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function retryAfterOf(value: string | null, now = Date.now()): number | null {
  if (value === null) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v);
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - now) / 1000));
}

/** Exponential backoff with full jitter: up to 250 ms, 500 ms, 1 s, … capped at 8 s. */
export function backoffMs(attempt: number, cap = 8000): number {
  const ceiling = Math.min(cap, 250 * 2 ** attempt);
  return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
}

/** True for fetch's failures to get an answer at all (not an abort or a timeout). */
export function isNetworkError(err: unknown): boolean {
  return err instanceof TypeError && !(err instanceof DOMException);
}

/** Waits `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A signal that aborts when `outer` does or when `timeoutMs` passes (0: never), with a
 * `TimeoutError` as AbortSignal.timeout gives; `stopClock()` stops the clock, `done()` also detaches
 * from `outer`.
 */
export function linkedSignal(
  outer: AbortSignal | undefined,
  timeoutMs: number,
): { signal: AbortSignal; stopClock: () => void; done: () => void } {
  const controller = new AbortController();
  const onAbort = () => controller.abort(outer!.reason);
  if (outer?.aborted) controller.abort(outer.reason);
  else outer?.addEventListener('abort', onAbort, { once: true });
  const timer =
    timeoutMs > 0
      ? setTimeout(() => controller.abort(new DOMException(`the call took longer than ${timeoutMs} ms`, 'TimeoutError')), timeoutMs)
      : undefined;
  return {
    signal: controller.signal,
    stopClock: () => clearTimeout(timer),
    done: () => {
      clearTimeout(timer);
      outer?.removeEventListener('abort', onAbort);
    },
  };
}

/** `body` as a stream that calls `done` once it ends, fails or is cancelled. */
export function withCleanup(body: ReadableStream<Uint8Array>, done: () => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { done: end, value } = await reader.read();
          if (end) {
            done();
            controller.close();
          } else controller.enqueue(value);
        } catch (err) {
          done();
          controller.error(err);
        }
      },
      async cancel(reason) {
        done();
        await reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/** Percent-encodes one path segment. */
export function seg(value: string): string {
  return encodeURIComponent(value);
}
