/**
 * The built function-gateway bundle dist/gateway.mjs (`node build.mjs` first) serving events of the
 * real API Gateway HTTP API payload (format 2.0), with its settings from the environment.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayEvent, GatewayResult } from '../../handlers/gateway.ts';
import { REPO } from '../helpers/env.ts';
import { AnswerChecker } from '../helpers/openapi.ts';
import { gatewayEvent as event } from '../helpers/gateway-event.ts';
import { startTestService, type TestService } from '../helpers/service.ts';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(() => svc?.stop());

describe('the built bundle dist/gateway.mjs', () => {
  it('serves a real event with settings from the environment', async () => {
    Object.assign(process.env, svc.env);
    const mod = (await import(pathToFileURL(join(REPO, 'dist/gateway.mjs')).href)) as { handler: (e: GatewayEvent) => Promise<GatewayResult> };
    const r = await mod.handler(event('POST', '/v0/signup', { body: '{}' }));
    expect(r.statusCode).toBe(201);
    const health = await mod.handler(event('GET', '/v0/health'));
    expect(JSON.parse(health.body).status).toBe('ok');
    // Its answers fit the document it serves (test/helpers/openapi.ts).
    const doc = await mod.handler(event('GET', '/v0/openapi.json'));
    expect(doc.statusCode).toBe(200);
    const checker = new AnswerChecker(JSON.parse(doc.body));
    checker.expectFits('POST', '/v0/signup', r.statusCode, JSON.parse(r.body));
    checker.expectFits('GET', '/v0/health', health.statusCode, JSON.parse(health.body));
  });
});
