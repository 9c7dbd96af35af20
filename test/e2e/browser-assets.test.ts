/**
 * The console's files from the Node entry (dist/node-server.mjs) and the function-gateway bundle
 * (dist/gateway.mjs), the two entries the browser journey does not use (it runs on the worker in
 * miniflare): each serves the page and its hashed files from memory, with the same validators and
 * headers, and answers preflights (docs/console.md "Serving"; docs/api.md "Browsers and CORS").
 * Needs dist/ (`npm test` builds it first).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayEvent, GatewayResult } from '../../handlers/gateway.ts';
import { REPO, testDeployment } from '../helpers/env.ts';
import { gatewayEvent } from '../helpers/gateway-event.ts';

let child: ChildProcess;
let url: string;
beforeAll(async () => {
  const { env } = await testDeployment({ SVCD_CORS_ORIGINS: '*' });
  child = spawn(join(REPO, 'node_modules/.bin/node'), [join(REPO, 'dist/node-server.mjs')], {
    env: { PATH: process.env.PATH!, ...env, SVCD_PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (out.includes('\n')) resolve((JSON.parse(out.split('\n')[0]!) as { url: string }).url);
    });
    child.once('exit', (code) => reject(new Error(`node entry exited ${code}`)));
  });
  // The gateway bundle reads its settings from the environment on its first event.
  Object.assign(process.env, env);
});
afterAll(() => {
  child?.kill('SIGTERM');
});

describe('the Node entry', () => {
  it('serves the console page with a strict CSP, and /console redirects to it', async () => {
    const redirect = await fetch(`${url}/console`, { redirect: 'manual' });
    expect(redirect.status).toBe(308);
    expect(redirect.headers.get('location')).toBe('/console/');
    const page = await fetch(`${url}/console/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('content-security-policy')).toContain("connect-src 'self'");
    expect(page.headers.get('cache-control')).toBe('no-cache');
    const html = await page.text();
    const script = /src="(app-[0-9a-f]{12}\.js)"/.exec(html)?.[1];
    const style = /href="(style-[0-9a-f]{12}\.css)"/.exec(html)?.[1];
    expect(script).toBeTruthy();
    expect(style).toBeTruthy();
    // Nothing from another origin.
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);

    const js = await fetch(`${url}/console/${script}`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toContain('immutable');
    const etag = js.headers.get('etag')!;
    expect(etag).toMatch(/^"[0-9a-f]{64}"$/);
    expect((await js.text()).length).toBeGreaterThan(1000);
    const again = await fetch(`${url}/console/${script}`, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);
    const css = await fetch(`${url}/console/${style}`);
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    await css.text();
    // Like every route, the files refuse a query parameter they do not know (docs/console.md).
    const queried = await fetch(`${url}/console/${script}?v=1`);
    expect(queried.status).toBe(400);
    expect(((await queried.json()) as { error: { message: string } }).error.message).toMatch(/^v: /);
  });

  it('answers an unknown console file with the 404 envelope', async () => {
    const r = await fetch(`${url}/console/nope.js`);
    expect(r.status).toBe(404);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('not_found');
  });

  it('answers preflights and carries CORS headers on errors', async () => {
    const pre = await fetch(`${url}/v0/projects`, { method: 'OPTIONS', headers: { origin: 'http://localhost:3000', 'access-control-request-method': 'POST' } });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    const denied = await fetch(`${url}/v0/projects`, { headers: { origin: 'http://localhost:3000' } });
    expect(denied.status).toBe(401);
    expect(denied.headers.get('access-control-allow-origin')).toBe('*');
    await denied.text();
  });
});

describe('the function-gateway bundle', () => {
  async function handler(): Promise<(e: GatewayEvent) => Promise<GatewayResult>> {
    return ((await import(pathToFileURL(join(REPO, 'dist/gateway.mjs')).href)) as { handler: (e: GatewayEvent) => Promise<GatewayResult> }).handler;
  }

  it('serves the console page and its script as text', async () => {
    const serve = await handler();
    const page = await serve(gatewayEvent('GET', '/console/'));
    expect(page.statusCode).toBe(200);
    expect(page.isBase64Encoded).toBe(false);
    const script = /src="(app-[0-9a-f]{12}\.js)"/.exec(page.body)?.[1];
    const js = await serve(gatewayEvent('GET', `/console/${script}`));
    expect(js.statusCode).toBe(200);
    expect(js.isBase64Encoded).toBe(false);
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
  });

  it('answers a preflight', async () => {
    const serve = await handler();
    const pre = await serve(gatewayEvent('OPTIONS', '/v0/projects', { headers: { origin: 'http://localhost:3000', 'access-control-request-method': 'POST' } }));
    expect(pre.statusCode).toBe(204);
    expect(pre.headers['access-control-allow-origin']).toBe('*');
  });
});
