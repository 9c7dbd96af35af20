/**
 * The built function-gateway bundle dist/gateway.mjs (`node build.mjs` first) serving events of the
 * real API Gateway HTTP API payload (format 2.0), with its settings from the environment.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayEvent, GatewayResult } from '../../handlers/gateway.ts';
import { REPO } from '../helpers/env.ts';
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
  });
});
