/**
 * The function-gateway entry (handlers/gateway.ts) against events of the real API Gateway HTTP API
 * payload (format 2.0), in process; the built bundle is test/e2e/gateway.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGatewayHandler, type GatewayEvent, type GatewayResult } from '../../handlers/gateway.ts';
import { gatewayEvent as event } from '../helpers/gateway-event.ts';
import { startTestService, type TestService } from '../helpers/service.ts';

let svc: TestService;
let handle: (e: GatewayEvent) => Promise<GatewayResult>;
beforeAll(async () => {
  svc = await startTestService();
  handle = createGatewayHandler(() => svc.app);
});
afterAll(() => svc?.stop());

describe('gateway entry', () => {
  it('answers a plain-text JSON body and a base64-encoded one alike', async () => {
    const plain = await handle(event('POST', '/v0/signup', { body: '{"name":"gw"}', headers: { 'content-type': 'application/json' } }));
    expect(plain.statusCode).toBe(201);
    expect(plain.isBase64Encoded).toBe(false);
    expect(JSON.parse(plain.body).account_id).toMatch(/^acct_/);
    expect(plain.headers['x-request-id']).toMatch(/^req_/);

    const b64 = await handle(event('POST', '/v0/signup', { body: Buffer.from('{"name":"gw2"}').toString('base64'), isBase64Encoded: true }));
    expect(b64.statusCode).toBe(201);
  });

  it('passes query strings and reads a comma-joined (repeated) Authorization header as duplicated', async () => {
    const su = JSON.parse((await handle(event('POST', '/v0/signup', { body: '{}' }))).body);
    const ok = await handle(event('GET', '/v0/projects', { rawQueryString: 'limit=1', headers: { authorization: `Bearer ${su.token}` } }));
    expect(ok.statusCode).toBe(200);
    expect(JSON.parse(ok.body)).toEqual({ projects: [], next_cursor: null });

    const bad = await handle(event('GET', '/v0/projects', { rawQueryString: 'limit=0', headers: { authorization: `Bearer ${su.token}` } }));
    expect(bad.statusCode).toBe(400);

    const dup = await handle(event('GET', '/v0/projects', { headers: { authorization: `Bearer ${su.token},Bearer ${su.token}` } }));
    expect(dup.statusCode).toBe(401);
    expect(dup.headers['www-authenticate']).toBe('Bearer realm="svc-cloud"');
  });

  it('accepts cookies in their own list without failing', async () => {
    const r = await handle(event('GET', '/v0/health', { cookies: ['a=1', 'b=2'] }));
    expect(r.statusCode).toBe(200);
  });

  it('sends small answers without the mark that keeps an edge from compressing them', async () => {
    for (const path of ['/v0/health', '/v0/nope']) {
      const r = await handle(event('GET', path));
      expect(r.body.length).toBeLessThan(1024);
      expect(r.headers['content-encoding']).toBeUndefined();
    }
  });

  it('answers unknown routes with the 404 envelope', async () => {
    const r = await handle(event('GET', '/v0/nope'));
    expect(r.statusCode).toBe(404);
    expect(JSON.parse(r.body).error.code).toBe('not_found');
  });
});
