/** Events of the real API Gateway HTTP API payload (format 2.0), for the gateway entry's suites. */
import type { GatewayEvent } from '../../handlers/gateway.ts';

/** An HTTP API (payload 2.0) event for `method rawPath`, with `init` over the defaults. */
export function gatewayEvent(method: string, rawPath: string, init: Partial<GatewayEvent> = {}): GatewayEvent {
  return {
    version: '2.0',
    rawPath,
    rawQueryString: '',
    headers: { host: 'abc123.execute-api.eu-west-1.amazonaws.com', 'user-agent': 'curl/8.0', ...(init.headers ?? {}) },
    requestContext: {
      http: { method, path: rawPath, sourceIp: '203.0.113.7' },
      domainName: 'abc123.execute-api.eu-west-1.amazonaws.com',
      requestId: 'Abc=',
    },
    isBase64Encoded: false,
    ...init,
  } as GatewayEvent;
}
