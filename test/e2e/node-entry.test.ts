/** The Node entry (dist/node-server.mjs): the same handlers as a long-lived server, over HTTP only. */
import { checkedJson } from '../helpers/openapi.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO, testDeployment } from '../helpers/env.ts';

let child: ChildProcess;
let url: string;
beforeAll(async () => {
  const { env } = await testDeployment();
  child = spawn(join(REPO, 'node_modules/.bin/node'), [join(REPO, 'dist/node-server.mjs')], {
    env: { PATH: process.env.PATH!, ...env, SVCD_PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const line = out.split('\n')[0];
      if (out.includes('\n')) resolve(JSON.parse(line!).url);
    });
    child.once('exit', (code) => reject(new Error(`node entry exited ${code}`)));
  });
});
afterAll(() => {
  child?.kill('SIGTERM');
});

describe('Node entry', () => {
  it('serves the handlers: health, signup, a session-guarded list, and the 404 envelope', async () => {
    // No host agent is registered in this deployment: the handlers answer, and say so (handlers/routes/health.ts).
    const health = await fetch(`${url}/v0/health`);
    expect(health.status).toBe(503);
    expect(await checkedJson(url, 'GET', '/v0/health', health)).toMatchObject({ error: { code: 'orchestrator_unavailable' }, status: 'degraded', agents: { live: 0, total: 0 } });
    const su = await fetch(`${url}/v0/signup`, { method: 'POST', body: '{}' });
    expect(su.status).toBe(201);
    const { token } = (await checkedJson(url, 'POST', '/v0/signup', su)) as { token: string };
    const list = await fetch(`${url}/v0/projects`, { headers: { authorization: `Bearer ${token}` } });
    expect(await checkedJson(url, 'GET', '/v0/projects', list)).toEqual({ projects: [], next_cursor: null });
    const missing = await fetch(`${url}/v0/nope`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get('x-request-id')).toMatch(/^req_/);
  });

  it('stops on SIGTERM with exit code 0', async () => {
    const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('refuses a bad setting at start with one line naming it', async () => {
    const { env } = await testDeployment();
    const bad = spawn(join(REPO, 'node_modules/.bin/node'), [join(REPO, 'dist/node-server.mjs')], {
      env: { PATH: process.env.PATH!, ...env, SVCD_SESSION_TTL: 'forever' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    bad.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const code = await new Promise<number | null>((r) => bad.on('exit', (c) => r(c)));
    expect(code).toBe(2);
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err).toContain('SVCD_SESSION_TTL');
  });
});
