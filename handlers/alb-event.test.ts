import { describe, expect, it } from 'vitest';
import { fromAlbEvent, isAlbEvent, toAlbResult, type AlbEvent } from './alb-event.ts';
import { createGatewayHandler, eventToRequest, handler } from './gateway.ts';
import type { App } from './index.ts';

/** An ALB Lambda event (multi-value headers on), as the balancer sends it. */
function albEvent(init: Partial<AlbEvent> = {}): AlbEvent {
  return {
    requestContext: { elb: { targetGroupArn: 'arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/fn/0123456789abcdef' } },
    httpMethod: 'GET',
    path: '/v0/projects',
    multiValueQueryStringParameters: { limit: ['1'], cursor: ['a%2Fb'] },
    multiValueHeaders: { host: ['svc.example.com'], accept: ['application/json', 'text/plain'], cookie: ['a=1', 'b=2'] },
    body: '',
    isBase64Encoded: false,
    ...init,
  };
}

describe('the function behind a load balancer', () => {
  it('tells a load balancer event from an HTTP API one', () => {
    expect(isAlbEvent(albEvent())).toBe(true);
    expect(isAlbEvent({ rawPath: '/', requestContext: { http: { method: 'GET' } } })).toBe(false);
  });

  it('reads the request as it arrived: raw query, repeated headers joined, cookies joined, host as the origin', () => {
    const request = eventToRequest(fromAlbEvent(albEvent()));
    expect(request.url).toBe('https://svc.example.com/v0/projects?limit=1&cursor=a%2Fb');
    expect(request.headers.get('accept')).toBe('application/json,text/plain');
    expect(request.headers.get('cookie')).toBe('a=1; b=2');
    expect(request.method).toBe('GET');
  });

  it('passes a base64 body on and a bare query flag as it came', () => {
    const e = fromAlbEvent(albEvent({ httpMethod: 'POST', body: 'e30=', isBase64Encoded: true, multiValueQueryStringParameters: { follow: [''] } }));
    expect(e).toMatchObject({ rawQueryString: 'follow', body: 'e30=', isBase64Encoded: true, requestContext: { http: { method: 'POST' } } });
  });

  it('answers with every header as a list, each Set-Cookie its own', () => {
    const r = toAlbResult({ statusCode: 201, headers: { 'content-type': 'application/json' }, cookies: ['a=1', 'b=2'], body: '{}', isBase64Encoded: false });
    expect(r).toEqual({ statusCode: 201, multiValueHeaders: { 'content-type': ['application/json'], 'set-cookie': ['a=1', 'b=2'] }, body: '{}', isBase64Encoded: false });
  });

  it('the function\'s handler answers a load balancer in the balancer\'s shape (an unknown path: 404, or 500 with no settings here)', async () => {
    const r = await handler(albEvent({ path: '/v0/nope', multiValueQueryStringParameters: {} }));
    expect(r).toHaveProperty('multiValueHeaders');
    expect(r).not.toHaveProperty('headers');
    expect([404, 500]).toContain(r.statusCode);
    expect(JSON.parse(r.body).error.code).toMatch(/^(not_found|internal)$/);
  });

  it('serves an app through the gateway entry', async () => {
    const app = { fetch: async (req: Request) => Response.json({ path: new URL(req.url).pathname, query: new URL(req.url).search }) } as unknown as App;
    const handle = createGatewayHandler(() => app);
    const result = toAlbResult(await handle(fromAlbEvent(albEvent())));
    expect(result.statusCode).toBe(200);
    expect(JSON.parse(result.body)).toEqual({ path: '/v0/projects', query: '?limit=1&cursor=a%2Fb' });
  });
});
