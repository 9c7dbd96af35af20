/**
 * End to end: `infra/local/start.ts` (what `npm start` runs) as a real process tree — DynamoDB
 * Local, the host agent, the handlers bundle in miniflare — driven over HTTP only.
 */
import { checkedJson } from '../helpers/openapi.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/local/dynamodb.ts';
import { REPO, tempDir } from '../helpers/env.ts';
import { descendants, alive } from '../helpers/procs.ts';

interface Started {
  child: ChildProcess;
  url: string;
  output: () => string;
}

const dir = tempDir('svc-e2e-');
const otherDir = tempDir('svc-e2e-other-');
const running: ChildProcess[] = [];
afterAll(async () => {
  for (const c of running) if (c.exitCode === null) c.kill('SIGKILL');
  dir.cleanup();
  otherDir.cleanup();
});

async function start(env: Record<string, string>): Promise<Started> {
  const child = spawn(join(REPO, 'node_modules/.bin/node'), [join(REPO, 'infra/local/start.ts'), '--dir', dir.dir, '--dynamodb-port', env.DYNAMO_PORT!], {
    cwd: REPO,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', SVCD_PORT: env.SVCD_PORT!, SVCD_AGENT_PORT: '0', SVCD_DATAPLANE_PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.push(child);
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const m = /svc-cloud ready at (\S+)/.exec(out);
      if (m) {
        clearInterval(timer);
        resolve(m[1]!);
      }
      if (child.exitCode !== null) {
        clearInterval(timer);
        reject(new Error(`stack exited ${child.exitCode}: ${out}`));
      }
    }, 50);
  });
  return { child, url, output: () => out };
}

async function stop(s: Started, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  const exited = new Promise<number | null>((r) => s.child.once('exit', (c) => r(c)));
  s.child.kill(signal);
  return exited;
}

describe('the local stack', () => {
  let port: number;
  let dynamoPort: number;
  let account: { account_id: string; account_secret: string; token: string };
  let project: { id: string };

  it('serves signup → create project → get project over HTTP', async () => {
    port = await freePort();
    dynamoPort = await freePort();
    const s = await start({ SVCD_PORT: String(port), DYNAMO_PORT: String(dynamoPort) });
    expect(s.url).toBe(`http://127.0.0.1:${port}`);

    const health = await fetch(`${s.url}/v0/health`);
    expect(health.status).toBe(200);

    const su = await fetch(`${s.url}/v0/signup`, { method: 'POST', body: '{}' });
    expect(su.status).toBe(201);
    account = (await checkedJson(s.url, 'POST', '/v0/signup', su)) as typeof account;

    const cp = await fetch(`${s.url}/v0/projects`, {
      method: 'POST',
      headers: { authorization: `Bearer ${account.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'e2e' }),
    });
    expect(cp.status).toBe(201);
    project = (await checkedJson(s.url, 'POST', '/v0/projects', cp)) as typeof project;

    const gp = await fetch(`${s.url}/v0/projects/${project.id}`, { headers: { authorization: `Bearer ${account.token}` } });
    expect(gp.status).toBe(200);
    expect(gp.headers.get('x-request-id')).toMatch(/^req_/);
    expect(((await checkedJson(s.url, 'GET', `/v0/projects/${project.id}`, gp)) as any).state).toBe('stopped');
    expect((await checkedJson(s.url, 'GET', '/v0/health', health.clone())).status).toBe('ok');

    // The agent's metrics through the one origin (docs/observability.md "Metrics").
    const scrape = await fetch(`${s.url}/metrics`);
    expect(scrape.status).toBe(200);
    expect(await scrape.text()).toMatch(/^svc_agent_tenants_running 0$/m);

    // A second stack (on another directory: this one is held) on the same port fails with one
    // line naming the port and the setting.
    const clash = spawn(join(REPO, 'node_modules/.bin/node'), [join(REPO, 'infra/local/start.ts'), '--dir', otherDir.dir, '--dynamodb-port', '0'], {
      cwd: REPO,
      env: { PATH: process.env.PATH!, SVCD_PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let clashErr = '';
    clash.stderr.setEncoding('utf8').on('data', (d: string) => (clashErr += d));
    const clashCode = await new Promise<number | null>((r) => clash.on('exit', (c) => r(c)));
    expect(clashCode).toBe(1);
    expect(clashErr.trim().split('\n')).toHaveLength(1);
    expect(clashErr).toContain(`port ${port}`);
    expect(clashErr).toContain('SVCD_PORT');

    // SIGTERM stops every process the stack started.
    const tree = descendants(s.child.pid!);
    expect(tree.length).toBeGreaterThanOrEqual(3);
    expect(await stop(s)).toBe(0);
    await new Promise((r) => setTimeout(r, 200));
    expect(tree.filter(alive)).toEqual([]);
  }, 120_000);

  it('keeps accounts and projects across a restart on the same directory', async () => {
    const s = await start({ SVCD_PORT: String(port), DYNAMO_PORT: String(dynamoPort) });
    const session = await fetch(`${s.url}/v0/sessions`, {
      method: 'POST',
      body: JSON.stringify({ account_id: account.account_id, account_secret: account.account_secret }),
    });
    expect(session.status).toBe(201);
    const { token } = (await session.json()) as { token: string };
    const gp = await fetch(`${s.url}/v0/projects/${project.id}`, { headers: { authorization: `Bearer ${token}` } });
    expect(gp.status).toBe(200);
    // The old token still verifies: the session secret persisted under the stack directory.
    const old = await fetch(`${s.url}/v0/projects`, { headers: { authorization: `Bearer ${account.token}` } });
    expect(old.status).toBe(200);

    const tree = descendants(s.child.pid!);
    expect(await stop(s, 'SIGINT')).toBe(0);
    await new Promise((r) => setTimeout(r, 200));
    expect(tree.filter(alive)).toEqual([]);
  }, 120_000);
});
