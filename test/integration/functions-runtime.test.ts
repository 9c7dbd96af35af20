/**
 * The function runtime's failures, bounds and isolation, produced for real against a host agent
 * running real worker processes (docs/functions.md "Errors", "Workers", "Isolation"): a function
 * that sleeps past its timeout (504), throws, returns a string or exits (502), concurrency flooded
 * per function and per agent (429 with Retry-After), a runtime that cannot start (503, and its
 * recovery); what a worker can reach; a project deleted while an invocation runs; an agent restart.
 * One service for the file, its workers run by a Node binary reached through a symlink the suite
 * can take away.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type Agent } from '../../host-agent/agent.ts';
import { fsStoreOf } from '../../host-agent/routes/blobs.ts';
import { allVersions, deleteHead, getFunction } from '../../shared/db/functions.ts';
import { loadSettings } from '../../shared/config.ts';
import { REPO } from '../helpers/env.ts';
import { errorOf, FunctionsClient, MODULES } from '../helpers/functions.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

const MAX_WORKERS = 6;

let svc: TestService;
let fns: FunctionsClient;
let token: string;
let project: string;
let nodeDir: string;
let restarted: Agent | undefined;

beforeAll(async () => {
  nodeDir = mkdtempSync(join(tmpdir(), 'svc-fn-node-'));
  symlinkSync(process.execPath, join(nodeDir, 'node'));
  svc = await startTestService({
    SVCD_FUNCTION_NODE: join(nodeDir, 'node'),
    SVCD_FUNCTION_MAX_WORKERS: String(MAX_WORKERS),
    // A worker per invocation, so that busy workers are easy to count here (several slots: functions.test.ts).
    SVCD_FUNCTION_WORKER_SLOTS: '1',
  });
  fns = new FunctionsClient((r) => svc.app.fetch(r));
  ({ token } = await signup(svc));
  project = await newProject();
});
afterAll(async () => {
  await restarted?.stop();
  await svc?.stop();
  rmSync(nodeDir, { recursive: true, force: true });
});

async function newProject(): Promise<string> {
  const r = await svc.request('POST', '/v0/projects', { token, body: { name: 'fn' } });
  expect(r.status).toBe(201);
  return ((await r.json()) as { id: string }).id;
}

async function logLines(p: string, name: string): Promise<string> {
  const r = await svc.request('GET', `/v0/projects/${p}/functions/${name}/logs?tail=100`, { token });
  return ((await r.json()) as { lines: string[] }).lines.join('\n');
}

/** Waits until `check` holds (polling), or fails after `ms`. */
async function until(check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const alive = (pid: number) => existsSync(`/proc/${pid}`) && !/State:\s+Z/.test(readFileSync(`/proc/${pid}/status`, 'utf8'));

describe('errors', () => {
  it('504 function_timeout: a function past its timeout has its worker killed', async () => {
    await fns.deployed(token, project, 'slow', MODULES.sleep, '?timeout_ms=300');
    const warm = (await (await fns.invoke(token, project, 'slow')).json()) as { pid: number };
    const started = Date.now();
    const r = await fns.invoke(token, project, 'slow', '?ms=5000');
    expect(r.status).toBe(504);
    expect(await errorOf(r)).toEqual({ code: 'function_timeout', message: 'function slow did not answer within its timeout of 300 ms' });
    expect(Date.now() - started).toBeLessThan(3000);
    await until(() => !alive(warm.pid));
    // The next invocation gets a new worker.
    const next = (await (await fns.invoke(token, project, 'slow')).json()) as { pid: number };
    expect(next.pid).not.toBe(warm.pid);
    expect(await logLines(project, 'slow')).toMatch(/ran past its timeout of 300 ms: worker \d+ killed/);
  });

  it('502 function_bad_output: the function throws (its stack in the logs, never in the answer)', async () => {
    await fns.deployed(token, project, 'throws', MODULES.throws);
    const r = await fns.invoke(token, project, 'throws');
    expect(r.status).toBe(502);
    expect(r.headers.get('x-request-id')).toMatch(/^req_/);
    expect(await errorOf(r)).toEqual({ code: 'function_bad_output', message: 'the function threw an exception (see its logs)' });
    expect(await logLines(project, 'throws')).toMatch(/stderr v1 Uncaught \(in fetch\): Error: kaboom/);
    // The worker survives its function's exception.
    expect((await fns.invoke(token, project, 'throws')).status).toBe(502);
    expect(svc.agent.ctx.functions.poolState(`${project}/throws`).idlePids).toHaveLength(1);
  });

  it('502 function_bad_output: the function returns something that is not a Response', async () => {
    await fns.deployed(token, project, 'string', MODULES.string);
    const r = await fns.invoke(token, project, 'string');
    expect(r.status).toBe(502);
    expect(await errorOf(r)).toEqual({ code: 'function_bad_output', message: 'the function returned a value that is not a Response' });
  });

  it('502 function_bad_output: the worker dies (process.exit)', async () => {
    await fns.deployed(token, project, 'exits', MODULES.exits);
    const r = await fns.invoke(token, project, 'exits');
    expect(r.status).toBe(502);
    expect(await errorOf(r)).toEqual({ code: 'function_bad_output', message: 'the worker of function exits exited (exit code 3) before answering (see its logs)' });
    expect(await logLines(project, 'exits')).toMatch(/worker \d+ exited \(exit code 3\)/);
    expect((await fns.invoke(token, project, 'exits')).status).toBe(502);
  });

  it('502 function_bad_output: a module that fails to load only in the environment it runs in', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'needs', `if (process.env.MODE === 'broken') throw new Error('no'); export default { fetch() { return new Response('ok') } };`);
    expect((await svc.request('PUT', `/v0/projects/${p}/functions/secrets/MODE`, { token, body: { value: 'broken' } })).status).toBe(201);
    const r = await fns.invoke(token, p, 'needs');
    expect(r.status).toBe(502);
    expect(await errorOf(r)).toEqual({ code: 'function_bad_output', message: 'the function failed to start (see its logs)' });
    expect(await logLines(p, 'needs')).toMatch(/The module failed to load: Error: no/);
  });

  it('429 function_busy with Retry-After: the function\'s max_concurrency is reached', async () => {
    await fns.deployed(token, project, 'narrow', MODULES.sleep, '?max_concurrency=2');
    const running = [fns.invoke(token, project, 'narrow', '?ms=1500'), fns.invoke(token, project, 'narrow', '?ms=1500')];
    await until(() => svc.agent.ctx.functions.inFlight(project) >= 2);
    const r = await fns.invoke(token, project, 'narrow');
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('1');
    expect(await errorOf(r)).toEqual({ code: 'function_busy', message: 'function narrow is already running 2 invocations (its max_concurrency)' });
    expect((await Promise.all(running)).map((x) => x.status)).toEqual([200, 200]);
    expect((await fns.invoke(token, project, 'narrow')).status).toBe(200);
  });

  it('429 function_busy: every worker slot of the agent is busy', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'wide', MODULES.sleep, '?max_concurrency=64');
    const running = Array.from({ length: MAX_WORKERS }, () => fns.invoke(token, p, 'wide', '?ms=2000'));
    await until(() => svc.agent.ctx.functions.poolState().busy >= MAX_WORKERS, 15_000);
    const r = await fns.invoke(token, p, 'wide');
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('1');
    expect((await errorOf(r)).message).toBe(`all ${MAX_WORKERS} function workers of this host agent are busy`);
    expect((await Promise.all(running)).every((x) => x.status === 200)).toBe(true);
  });

  it('503 function_runtime_missing when the runtime cannot start, and recovers once it can', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'cold', MODULES.hello);
    const link = join(nodeDir, 'node');
    renameSync(link, `${link}.away`);
    try {
      const r = await fns.invoke(token, p, 'cold');
      expect(r.status).toBe(503);
      expect((await errorOf(r)).code).toBe('function_runtime_missing');
      const d = await fns.deploy(token, p, 'other', MODULES.hello);
      expect(d.status).toBe(503);
      expect((await errorOf(d)).code).toBe('function_runtime_missing');
    } finally {
      renameSync(`${link}.away`, link);
    }
    // Probed again a few seconds after a failure (docs/functions.md "Workers"), not only at the agent's start.
    const deadline = Date.now() + 15_000;
    let status = 0;
    while (status !== 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      status = (await fns.invoke(token, p, 'cold')).status;
    }
    expect(status).toBe(200);
  });
});

describe('isolation', () => {
  it('a function reads neither the agent\'s state nor /etc/passwd, writes nothing, spawns nothing, sees no agent setting', async () => {
    await fns.deployed(token, project, 'probe', MODULES.probe);
    const r = await fns.invoke(token, project, 'probe', `?dir=${encodeURIComponent(svc.agent.ctx.root)}`);
    const seen = (await r.json()) as Record<string, { ok: boolean; error?: string }> & { agentSettings: string[] };
    expect(seen.stateDir).toMatchObject({ ok: false, error: 'ERR_ACCESS_DENIED' });
    expect(seen.passwd).toMatchObject({ ok: false, error: 'ERR_ACCESS_DENIED' });
    expect(seen.write).toMatchObject({ ok: false, error: 'ERR_ACCESS_DENIED' });
    expect(seen.spawn).toMatchObject({ ok: false, error: 'ERR_ACCESS_DENIED' });
    expect(seen.worker).toMatchObject({ ok: false, error: 'ERR_ACCESS_DENIED' });
    expect(seen.kill!.ok).toBe(false);
    expect(seen.agentSettings).toEqual([]);
    expect(existsSync('/tmp/svc-function-probe')).toBe(false);
  });

  it('a worker runs as its own process with the permission model and the version\'s heap limit', async () => {
    await fns.deployed(token, project, 'small', MODULES.sleep, '?memory_mb=48');
    const { pid } = (await (await fns.invoke(token, project, 'small')).json()) as { pid: number };
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    expect(argv).toContain('--permission');
    expect(argv).toContain('--max-old-space-size=48');
    expect(argv.filter((a) => a.startsWith('--allow-'))).toHaveLength(2);
    expect(readFileSync(`/proc/${pid}/environ`, 'utf8')).toBe('');
  });
});

describe('lifecycle of the project and the agent', () => {
  it('a project is not deleted while an invocation of it runs (409), then is, and its functions are gone', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'busy', MODULES.sleep);
    const running = fns.invoke(token, p, 'busy', '?ms=1500');
    await until(() => svc.agent.ctx.functions.inFlight(p) === 1);
    const refused = await svc.request('DELETE', `/v0/projects/${p}`, { token });
    expect(refused.status).toBe(409);
    expect((await errorOf(refused)).message).toMatch(/a function invocation of the project is in progress/);
    expect((await running).status).toBe(200);
    expect((await svc.request('DELETE', `/v0/projects/${p}`, { token })).status).toBe(200);
    expect((await fns.invoke(token, p, 'busy')).status).toBe(404);
    expect(existsSync(join(svc.agent.ctx.root, 'functions', p))).toBe(false);
  });

  it('a delete cut short by a crash leaves versions no head names: never listed, removed with their bytes at the next start', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'gone', MODULES.hello);
    await fns.deployed(token, p, 'gone', `${MODULES.hello}//2`);
    const head = (await getFunction(svc.db, p, 'gone'))!;
    // The delete's commit point, then the crash: the head and its receipt are gone, the versions stay.
    expect(await deleteHead(svc.db, head, { actor: 'acct_0000000000000000', requestId: 'req_0', at: new Date().toISOString() })).toBe(true);
    const left = await allVersions(svc.db, p, 'gone', head.generation);
    expect(left).toHaveLength(2);
    const store = fsStoreOf(svc.agent.ctx);
    for (const v of left) expect(existsSync(store.pathOf(p, v.blob))).toBe(true);
    // Deployed again meanwhile: a new generation, the leftovers never listed.
    expect((await fns.deploy(token, p, 'gone', MODULES.hello)).status).toBe(201);
    const listed = (await (await svc.request('GET', `/v0/projects/${p}/functions/gone/versions`, { token })).json()) as { versions: unknown[] };
    expect(listed.versions).toHaveLength(1);
    // The agent's next start sweeps them, bytes first.
    await svc.agent.ctx.functions.start();
    expect(await allVersions(svc.db, p, 'gone', head.generation)).toEqual([]);
    for (const v of left) expect(existsSync(store.pathOf(p, v.blob))).toBe(false);
    expect((await fns.invoke(token, p, 'gone')).status).toBe(200);
  });

  it('an agent restart loses no deployed function; its workers end with it', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'kept', MODULES.sleep);
    const { pid } = (await (await fns.invoke(token, p, 'kept')).json()) as { pid: number };
    await svc.agent.stop();
    await until(() => !alive(pid));
    restarted = await startAgent(loadSettings(svc.env), { db: svc.db, cwd: REPO, log: (line) => svc.logs.push(line) });
    const r = await fns.invoke(token, p, 'kept');
    expect(r.status).toBe(200);
    expect(((await r.json()) as { pid: number }).pid).not.toBe(pid);
  });
});

/** A function that fetches `?url=` and answers what happened, with its own pid. */
const CALLER = `export default { async fetch(request) {
  const url = new URL(request.url).searchParams.get('url');
  try { const r = await fetch(url); return Response.json({ pid: process.pid, reached: await r.text() }); }
  catch (e) { return Response.json({ pid: process.pid, error: String(e.cause?.code ?? e.message) }); }
} };`;

const userNamespaces = spawnSync('unshare', ['--user', '--map-root-user', '--net', 'true']).status === 0;

describe('the network of a worker', () => {
  let local: Server;
  let localUrl: string;
  let sandboxed: TestService | undefined;
  beforeAll(async () => {
    local = createServer((_req, res) => res.end('from the host'));
    await new Promise<void>((r) => local.listen(0, '127.0.0.1', r));
    localUrl = `http://127.0.0.1:${(local.address() as AddressInfo).port}/`;
  });
  afterAll(async () => {
    await sandboxed?.stop();
    local?.close();
  });

  it('is the host\'s by default: a function reaches a loopback listener (docs/functions.md "Isolation")', async () => {
    await fns.deployed(token, project, 'caller', CALLER);
    const seen = (await (await fns.invoke(token, project, 'caller', `?url=${encodeURIComponent(localUrl)}`)).json()) as { reached?: string };
    expect(seen.reached).toBe('from the host');
  });

  it.skipIf(!userNamespaces)('is none in the unshare sandbox, which also hides every other process', async () => {
    sandboxed = await startTestService({ SVCD_FUNCTION_SANDBOX: 'unshare' });
    const client = new FunctionsClient((r) => sandboxed!.app.fetch(r));
    const { token: t } = await signup(sandboxed);
    const r = await sandboxed.request('POST', '/v0/projects', { token: t, body: { name: 'sandboxed' } });
    const p = ((await r.json()) as { id: string }).id;
    await client.deployed(t, p, 'caller', CALLER);
    const seen = (await (await client.invoke(t, p, 'caller', `?url=${encodeURIComponent(localUrl)}`)).json()) as { pid: number; reached?: string; error?: string };
    expect(seen.reached).toBeUndefined();
    expect(seen.error).toMatch(/ECONNREFUSED|ENETUNREACH|EADDRNOTAVAIL/);
    expect(seen.pid).toBe(1);
    const probe = await client.deployed(t, p, 'probe', MODULES.probe);
    expect(probe.version).toBe(1);
    const denied = (await (await client.invoke(t, p, 'probe', `?dir=${encodeURIComponent(sandboxed.agent.ctx.root)}`)).json()) as Record<string, { ok: boolean }>;
    expect(denied.passwd!.ok).toBe(false);
  });
});
