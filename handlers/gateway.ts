/**
 * Function-gateway entry: an API Gateway HTTP API (payload format 2.0) event becomes a web Request,
 * the same app answers it, and the Response becomes the gateway's result. Bodies arrive and leave
 * base64-encoded when binary; repeated headers arrive comma-joined and cookies in their own list.
 * Settings come from the function's environment, parsed on the first invocation of a container.
 */
import { ConfigError } from '../shared/config.ts';
import { ServiceError, errorResponse, errors } from '../shared/errors.ts';
import { newRequestId } from '../shared/ids.ts';
import { nodeTransport } from '../shared/db/transport-node.ts';
import { buildDeps } from './deps.ts';
import { createApp, type App } from './index.ts';
import { fromBase64, toBase64 } from '../shared/base64.ts';
import { isIdentityCoding } from '../shared/http/encoding.ts';
import { fromAlbEvent, isAlbEvent, toAlbResult, type AlbEvent, type AlbResult } from './alb-event.ts';

/** The parts of an API Gateway v2 (HTTP API) event this entry reads. */
export interface GatewayEvent {
  version?: string;
  rawPath: string;
  rawQueryString?: string;
  cookies?: string[];
  headers?: Record<string, string | undefined>;
  body?: string;
  isBase64Encoded?: boolean;
  requestContext: { http: { method: string; path?: string; sourceIp?: string }; domainName?: string; requestId?: string };
}

/** The gateway's result shape (payload format 2.0). */
export interface GatewayResult {
  statusCode: number;
  headers: Record<string, string>;
  cookies?: string[];
  body: string;
  isBase64Encoded: boolean;
}

const TEXT_TYPES = /^(text\/|application\/(json|xml|javascript|x-www-form-urlencoded)|[^;]*\+json|[^;]*\+xml)/i;

/** Converts a gateway event into a Request. */
export function eventToRequest(event: GatewayEvent): Request {
  const host = event.requestContext.domainName ?? event.headers?.host ?? 'localhost';
  const query = event.rawQueryString ? `?${event.rawQueryString}` : '';
  const url = `https://${host}${event.rawPath}${query}`;
  const headers = new Headers();
  for (const [name, value] of Object.entries(event.headers ?? {})) if (value !== undefined) headers.set(name, value);
  if (event.cookies?.length) headers.set('cookie', event.cookies.join('; '));
  const method = event.requestContext.http.method.toUpperCase();
  let body: BodyInit | undefined;
  if (event.body !== undefined && event.body !== null && method !== 'GET' && method !== 'HEAD') {
    body = event.isBase64Encoded ? fromBase64(event.body) : event.body;
  }
  return new Request(url, { method, headers, body });
}

/** Converts a Response into the gateway's result; non-text bodies are base64. */
export async function responseToResult(response: Response): Promise<GatewayResult> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    // `identity` only kept an edge from compressing a small answer (shared/http/encoding.ts): a gateway's client is told nothing by it.
    if (name !== 'set-cookie' && !isIdentityCoding(name, value)) headers[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  const bytes = new Uint8Array(await response.arrayBuffer());
  const type = response.headers.get('content-type') ?? '';
  const text = bytes.byteLength === 0 || TEXT_TYPES.test(type);
  return {
    statusCode: response.status,
    headers,
    ...(cookies.length ? { cookies } : {}),
    body: text ? new TextDecoder().decode(bytes) : toBase64(bytes),
    isBase64Encoded: !text,
  };
}

let app: App | undefined;

/** Builds the gateway handler over an app (tests hand in their own). */
export function createGatewayHandler(getApp: () => App): (event: GatewayEvent) => Promise<GatewayResult> {
  return async (event) => {
    // The app renders every error it meets; what fails before it is rendered the same way here.
    let app: App;
    try {
      app = getApp();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      console.error(err.message);
      return responseToResult(errorResponse(new ServiceError('internal', 'service misconfigured'), newRequestId()));
    }
    let request: Request;
    try {
      request = eventToRequest(event);
    } catch {
      return responseToResult(errorResponse(errors.invalid('malformed request'), newRequestId()));
    }
    return responseToResult(await app.fetch(request));
  };
}

const gateway = createGatewayHandler(() => {
  app ??= createApp(buildDeps((globalThis as { process?: { env: Record<string, unknown> } }).process?.env ?? {}, undefined, { transport: nodeTransport() }));
  return app;
});

/** The function's handler (`dist/gateway.mjs` → `handler`): an HTTP API's events, or a load balancer's (./alb-event.ts). */
export const handler = async (event: GatewayEvent | AlbEvent): Promise<GatewayResult | AlbResult> =>
  isAlbEvent(event) ? toAlbResult(await gateway(fromAlbEvent(event))) : gateway(event);
