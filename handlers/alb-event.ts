/**
 * The function behind an Application Load Balancer (docs/deploy.md "The entry"): the balancer's
 * Lambda event (its target group with multi-value headers on) becomes the function-gateway event the
 * entry reads (./gateway.ts), and the entry's result becomes the balancer's. The balancer passes the
 * query as it arrived (not decoded), so the raw query string is rebuilt from its parameters as they
 * came; repeated headers arrive as lists and leave as lists (every `Set-Cookie` among them).
 */
import type { GatewayEvent, GatewayResult } from './gateway.ts';

/** The parts of an ALB Lambda event (multi-value headers enabled) this entry reads. */
export interface AlbEvent {
  requestContext: { elb: { targetGroupArn: string } };
  httpMethod: string;
  path: string;
  multiValueQueryStringParameters?: Record<string, string[]> | null;
  multiValueHeaders?: Record<string, string[] | undefined> | null;
  body?: string | null;
  isBase64Encoded?: boolean;
}

/** The balancer's result shape (multi-value headers). */
export interface AlbResult {
  statusCode: number;
  multiValueHeaders: Record<string, string[]>;
  body: string;
  isBase64Encoded: boolean;
}

/** Whether an event came from a load balancer's target group rather than an HTTP API. */
export function isAlbEvent(event: object): event is AlbEvent {
  return 'elb' in ((event as { requestContext?: object }).requestContext ?? {});
}

/** The same request as a function-gateway (payload 2.0) event. */
export function fromAlbEvent(event: AlbEvent): GatewayEvent {
  const query = Object.entries(event.multiValueQueryStringParameters ?? {})
    .flatMap(([name, values]) => values.map((value) => (value === '' ? name : `${name}=${value}`)))
    .join('&');
  const headers: Record<string, string> = {};
  for (const [name, values] of Object.entries(event.multiValueHeaders ?? {})) {
    // RFC 9110 §5.3: repeated fields join with commas; cookies with `; ` (RFC 6265 §5.4).
    if (values?.length) headers[name.toLowerCase()] = values.join(name.toLowerCase() === 'cookie' ? '; ' : ',');
  }
  return {
    rawPath: event.path,
    rawQueryString: query,
    headers,
    ...(event.body ? { body: event.body } : {}),
    isBase64Encoded: event.isBase64Encoded ?? false,
    requestContext: { http: { method: event.httpMethod }, ...(headers.host ? { domainName: headers.host } : {}) },
  };
}

/** The entry's result as the balancer's. */
export function toAlbResult(result: GatewayResult): AlbResult {
  const multiValueHeaders: Record<string, string[]> = Object.fromEntries(Object.entries(result.headers).map(([name, value]) => [name, [value]]));
  if (result.cookies?.length) multiValueHeaders['set-cookie'] = result.cookies;
  return { statusCode: result.statusCode, multiValueHeaders, body: result.body, isBase64Encoded: result.isBase64Encoded };
}
