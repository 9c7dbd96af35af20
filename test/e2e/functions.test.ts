/**
 * Functions where they ship (docs/functions.md): the handlers bundle in miniflare (workerd), the real
 * host agent with its function runtimes (workerd processes, in the OS sandbox wherever the host
 * allows it, as `npm start` chooses) and the local front, driven over HTTP only. Deploy, list,
 * versions and the answers of the control routes are checked against the service's own OpenAPI
 * document; invocations with a session and with a key, secrets in the environment, bodies streamed
 * both ways through workerd; and the agent killed under an invocation: the invocation is lost, never
 * replayed, its runtimes die with the agent, and the function survives the restart.
 */
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { startSuiteStack } from '../helpers/stack.ts';
import { tempDir } from '../helpers/env.ts';
import { commOf, FunctionsClient, httpSend, MODULES } from '../helpers/functions.ts';
import { checkedJson } from '../helpers/openapi.ts';
import { alive, descendants } from '../helpers/procs.ts';

const MiB = 1024 * 1024;
/** The public origin the deployment names (SVCD_CLOUD_ORIGIN): what functions see as CLOUD_ORIGIN and in their URLs. */
const ORIGIN = 'https://api.example.test';

let stack: Stack;
let dir: ReturnType<typeof tempDir>;
let fns: FunctionsClient;
let token: string;
let project: string;
let key: string;

/** A control-plane call with a JSON body, its answer checked against the OpenAPI document. */
async function ok(method: string, path: string, body?: unknown, status = 200): Promise<any> {
  const r = await fetch(`${stack.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const parsed = await checkedJson(stack.url, method, path, r);
  expect(r.status, `${method} ${path}: ${JSON.stringify(parsed)}`).toBe(status);
  return parsed;
}

beforeAll(async () => {
  dir = tempDir('svc-e2e-functions-');
  stack = await startSuiteStack(dir.dir, { SVCD_CLOUD_ORIGIN: ORIGIN });
  fns = new FunctionsClient(httpSend(stack.url));
  const signedUp = await fetch(`${stack.url}/v0/signup`, { method: 'POST', body: '{}' });
  token = ((await signedUp.json()) as { token: string }).token;
  project = (await ok('POST', '/v0/projects', { name: 'functions' }, 201)).id;
  key = (await ok('POST', `/v0/projects/${project}/keys`, {}, 201)).key;
});

/** Sends `request` as written on a connection of its own to the stack and answers all it gets back. */
function rawExchange(request: string): Promise<string> {
  const { hostname, port } = new URL(stack.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.on('error', reject);
  });
}

/** `pid` and its ancestors below `top`, read from /proc. */
function ancestry(pid: number, top: number): number[] {
  const out: number[] = [];
  for (let p = pid; p !== top && p > 1; ) {
    out.push(p);
    const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
    p = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  }
  return out;
}

afterAll(async () => {
  await stack?.stop();
  dir?.cleanup();
});

describe('functions over HTTP through the local stack', () => {
  it('deploys, lists, reads versions and invokes with the session and with a key, secrets injected', async () => {
    const deployed = await fns.deploy(token, project, 'echo', MODULES.echo);
    expect(deployed.status).toBe(201);
    const record = await checkedJson(stack.url, 'PUT', `/v0/projects/${project}/functions/echo`, deployed);
    expect(record).toMatchObject({ project, name: 'echo', version: 1 });
    expect((await ok('GET', `/v0/projects/${project}/functions`)).functions).toEqual([record]);
    expect((await ok('GET', `/v0/projects/${project}/functions/echo/versions`)).versions).toHaveLength(1);

    for (const auth of [token, key]) {
      const r = await fns.invoke(auth, project, 'echo', '/a/b?c=d', { method: 'POST', headers: { 'x-custom': '1' }, body: 'hi' });
      expect(r.status).toBe(201);
      expect(r.headers.get('x-request-id')).toMatch(/^req_/);
      const seen = (await r.json()) as { method: string; path: string; query: string; origin: string; body: string; headers: Record<string, string>; env: Record<string, string> };
      expect(seen).toMatchObject({ method: 'POST', path: '/a/b', query: '?c=d', body: 'hi', origin: ORIGIN });
      expect(seen.headers['x-custom']).toBe('1');
      expect(seen.headers.authorization).toBeUndefined();
      expect(seen.env).toEqual({ PROJECT_ID: project, FUNCTION_NAME: 'echo', CLOUD_ORIGIN: ORIGIN });
    }

    await ok('PUT', `/v0/projects/${project}/functions/secrets/API_KEY`, { value: 'from-the-stack' }, 201);
    await fns.deployed(token, project, 'env', MODULES.env);
    const env = (await (await fns.invoke(key, project, 'env')).json()) as { env: Record<string, string> };
    expect(env.env.API_KEY).toBe('from-the-stack');

    const denied = await fns.invoke(null, project, 'echo');
    expect(denied.status).toBe(401);
    expect(await checkedJson(stack.url, 'GET', `/v0/projects/${project}/functions/echo/invoke`, denied)).toMatchObject({ error: { code: 'authentication_required' } });
  });

  it('hands the function a body sent with its Content-Length and an empty POST, with the path remainder and query', async () => {
    await fns.deployed(token, project, 'lengths', MODULES.echo);
    type Seen = { method: string; url: string; path: string; query: string; body: string; length: number; headers: Record<string, string> };
    const url = (rest: string) => `${stack.url}/v0/projects/${project}/functions/lengths/invoke${rest}`;
    for (const auth of [token, key]) {
      // A string body: fetch declares its length (the hop through workerd then declares it too).
      const post = await fetch(url('/a/b?x=1'), { method: 'POST', headers: { authorization: `Bearer ${auth}` }, body: 'hello world' });
      expect(post.status).toBe(201);
      const seen = (await post.json()) as Seen;
      expect(seen).toMatchObject({ method: 'POST', url: `${ORIGIN}/a/b?x=1`, path: '/a/b', query: '?x=1', body: 'hello world', length: 11 });
      expect(seen.headers['content-length']).toBe('11');

      // No body: fetch declares 0.
      const empty = await fetch(url(''), { method: 'POST', headers: { authorization: `Bearer ${auth}` } });
      expect(empty.status).toBe(201);
      expect(await empty.json()).toMatchObject({ method: 'POST', url: `${ORIGIN}/`, path: '/', query: '', body: '', length: 0 });
    }
    // No body and no length at all, as `curl -X POST` sends it.
    const raw = await rawExchange(
      `POST /v0/projects/${project}/functions/lengths/invoke/c?d=e HTTP/1.1\r\nhost: ${new URL(stack.url).host}\r\nauthorization: Bearer ${token}\r\nconnection: close\r\n\r\n`,
    );
    expect(raw.split('\r\n')[0]).toBe('HTTP/1.1 201 Created');
    expect(JSON.parse(raw.slice(raw.indexOf('{'), raw.lastIndexOf('}') + 1))).toMatchObject({ method: 'POST', url: `${ORIGIN}/c?d=e`, body: '', length: 0 });
  });

  it('streams 20 MiB through the function and back', async () => {
    await fns.deployed(token, project, 'mirror', MODULES.mirror);
    let left = 20 * MiB;
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        if (left <= 0) return c.close();
        const n = Math.min(64 * 1024, left);
        left -= n;
        c.enqueue(new Uint8Array(n).fill(7));
      },
    });
    const r = await fns.invoke(key, project, 'mirror', '', { method: 'POST', body });
    expect(r.status).toBe(200);
    let got = 0;
    for await (const chunk of r.body!) got += chunk.byteLength;
    expect(got).toBe(20 * MiB);
  });

  it('loses an invocation its agent dies under (never replayed); its runtimes die too; the function survives the restart', async () => {
    await fns.deployed(token, project, 'sleep', MODULES.sleep);
    const first = (await (await fns.invoke(key, project, 'sleep')).json()) as { isolate: string };
    const agentPid = stack.agent.pid!;
    // The agent's runtimes: workerd processes, and (under the OS sandbox) the namespace holders between them and the agent.
    const workers = descendants(agentPid).filter((pid) => commOf(pid) === 'workerd');
    expect(workers.length).toBeGreaterThan(0);
    const tree = [...new Set(workers.flatMap((pid) => ancestry(pid, agentPid)))];

    const running = fns.invoke(key, project, 'sleep', '?ms=5000').then(
      (r) => r.status,
      () => 'reset' as const,
    );
    await new Promise((r) => setTimeout(r, 500));
    stack.agent.kill('SIGKILL');
    const outcome = await running;
    expect(['reset', 502]).toContain(outcome);
    // The kernel ends them with their agent (setpriv --pdeathsig, unshare --kill-child), stuck or not.
    const deadline = Date.now() + 5000;
    while (tree.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(workers.filter(alive)).toEqual([]);
    expect(tree.filter(alive)).toEqual([]);

    await stack.restartAgent(0);
    const after = await fns.invoke(key, project, 'sleep');
    expect(after.status).toBe(200);
    const served = (await after.json()) as { env: unknown; isolate: string };
    expect(served.env).toBe('from-the-stack');
    expect(served.isolate).not.toBe(first.isolate);
    expect((await ok('GET', `/v0/projects/${project}/functions/sleep`)).version).toBe(1);
  });
});
