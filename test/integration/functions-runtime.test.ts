/**
 * The function runtime's failures, bounds and isolation, produced for real against a host agent
 * running real function runtimes (docs/functions.md "Errors", "Runtimes", "Isolation", "Egress"):
 * workerd processes in the OS sandbox, one per project and memory_mb, each function version an
 * isolate. A function that waits past its timeout (504, its runtime serving on) or loops past it
 * (504, its runtime killed, the invocations beside it 502, a fresh runtime for the next); one that
 * throws, returns a string, calls process.exit, fails to load or passes its memory limit (502); a
 * runtime past its memory bound recycled;
 * concurrency flooded per function, per project and per agent (429 with Retry-After); a runtime that
 * cannot start (503, and its recovery; a binary that does not exist, named); what a runtime's
 * process is and can reach (its user, namespaces, root, cgroup, environment; files, processes,
 * agent settings; the network only through the egress filter, the filter's development escape
 * hatch); the sandbox turned off; a project deleted while an invocation runs; an agent restart.
 * One service for the file, its runtimes run by a workerd binary reached through a symlink the suite
 * can take away; the services of other settings are started by the tests that need them.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type Agent } from '../../host-agent/agent.ts';
import { packagedWorkerd } from '../../host-agent/functions/launch.ts';
import { runtimeMemoryMb } from '../../host-agent/functions/limits.ts';
import { RUNTIME_UID_BASE, uidOf } from '../../host-agent/functions/sandbox.ts';
import { allVersions, deleteHead, getFunction, putVersion } from '../../shared/db/functions.ts';
import { loadSettings } from '../../shared/config.ts';
import { REPO } from '../helpers/env.ts';
import {
  cgroupCpuPercent,
  cgroupMemoryLimit,
  cgroupPidsMax,
  cgroupsOf,
  commOf,
  errorOf,
  FunctionsClient,
  MODULES,
  namespaceOf,
  runtimesOf,
  statusField,
  workerdOf,
  type RuntimeState,
} from '../helpers/functions.ts';
import { alive } from '../helpers/procs.ts';
import { signup, startTestService, type TestService } from '../helpers/service.ts';

const MiB = 1024 * 1024;
/** Runtimes of the agent (SVCD_FUNCTION_MAX_RUNTIMES). */
const MAX_RUNTIMES = 3;
/** In-flight invocations of one project (SVCD_FUNCTION_PROJECT_CONCURRENCY). */
const PROJECT_SHARE = 4;
/** The default SVCD_FUNCTION_PROJECT_MEMORY_MB. */
const PROJECT_MEMORY_MB = 1024;

let svc: TestService;
let fns: FunctionsClient;
let token: string;
let project: string;
let workerdDir: string;
let restarted: Agent | undefined;

beforeAll(async () => {
  const workerd = packagedWorkerd();
  if (workerd === null) throw new Error('the workerd package is not installed');
  workerdDir = mkdtempSync(join(tmpdir(), 'svc-fn-workerd-'));
  symlinkSync(workerd, join(workerdDir, 'workerd'));
  svc = await startTestService({
    SVCD_FUNCTION_WORKERD: join(workerdDir, 'workerd'),
    SVCD_FUNCTION_MAX_RUNTIMES: String(MAX_RUNTIMES),
    SVCD_FUNCTION_PROJECT_CONCURRENCY: String(PROJECT_SHARE),
  });
  fns = new FunctionsClient((r) => svc.app.fetch(r));
  ({ token } = await signup(svc));
  project = await newProject();
});
afterAll(async () => {
  await restarted?.stop();
  await svc?.stop();
  rmSync(workerdDir, { recursive: true, force: true });
});

async function newProject(on: TestService = svc, t = token): Promise<string> {
  const r = await on.request('POST', '/v0/projects', { token: t, body: { name: 'fn' } });
  expect(r.status).toBe(201);
  return ((await r.json()) as { id: string }).id;
}

async function logLines(p: string, name: string, on: TestService = svc, t = token): Promise<string> {
  const r = await on.request('GET', `/v0/projects/${p}/functions/${name}/logs?tail=100`, { token: t });
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

/** The runtimes of the service's agent now. */
const state = (on: TestService = svc): RuntimeState => on.agent.ctx.functions.runtimeState();

/** The one runtime of project `p` at `memoryMb` (default 128), with its workerd process. */
function runtimeOf(p: string, memoryMb = 128, on: TestService = svc) {
  const found = runtimesOf(state(on), p, memoryMb);
  expect(found, `runtimes of ${p} at ${memoryMb} MiB`).toHaveLength(1);
  const workerd = workerdOf(found[0]!.pid);
  expect(workerd, `the workerd process of runtime ${found[0]!.pid}`).not.toBeNull();
  return { ...found[0]!, workerd: workerd! };
}

/** Deploys `hello` in project `p` (once) and invokes it: its 128 MiB runtime is then running. */
async function warm(p: string): Promise<void> {
  const r = await fns.invoke(token, p, 'warm');
  if (r.status === 404) await fns.deployed(token, p, 'warm', MODULES.hello);
  else await r.arrayBuffer();
  expect((await fns.invoke(token, p, 'warm')).status).toBe(200);
}

/** A listener on 127.0.0.1 that counts the connections it gets. */
async function countingListener(): Promise<{ server: Server; port: number; url: string; connections: () => number }> {
  let connections = 0;
  const server = createServer((_req, res) => res.end('from the host'));
  server.on('connection', () => connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { server, port, url: `http://127.0.0.1:${port}/`, connections: () => connections };
}

/** A function that fetches each `?url=` and answers what each got: status, the egress filter's refusal, body. */
const CALLER = `export default { async fetch(request) {
  const urls = new URL(request.url).searchParams.getAll('url');
  return Response.json(await Promise.all(urls.map(async (url) => {
    try {
      const r = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(5000) });
      return { url, status: r.status, refused: r.headers.get('x-svc-egress-refused'), body: (await r.text()).slice(0, 300) };
    } catch (e) { return { url, error: String((e && ((e.cause && e.cause.code) || e.name)) || e) }; }
  })));
} };`;

/** A function that opens raw TCP to `?host=`, `?port=` with cloudflare:sockets and with node:net; answers what each got. */
const RAW_TCP = `export default { async fetch(request) {
  const q = new URL(request.url).searchParams;
  const host = q.get('host');
  const port = Number(q.get('port'));
  const out = {};
  try {
    const { connect } = await import('cloudflare:sockets');
    const socket = connect({ hostname: host, port });
    await Promise.race([socket.opened, new Promise((_, no) => setTimeout(() => no(new Error('timeout')), 3000))]);
    const writer = socket.writable.getWriter();
    await writer.write(new TextEncoder().encode('GET / HTTP/1.1\\r\\nhost: x\\r\\nconnection: close\\r\\n\\r\\n'));
    const { value } = await Promise.race([socket.readable.getReader().read(), new Promise((_, no) => setTimeout(() => no(new Error('timeout')), 3000))]);
    out.sockets = { opened: true, received: new TextDecoder().decode(value ?? new Uint8Array()) };
  } catch (e) { out.sockets = { opened: false, error: String((e && e.name) || e) }; }
  try {
    const net = await import('node:net');
    out.net = await new Promise((resolve) => {
      let received = '';
      const s = net.connect({ host, port });
      s.on('connect', () => s.write('GET / HTTP/1.1\\r\\nhost: x\\r\\nconnection: close\\r\\n\\r\\n'));
      s.on('data', (d) => { received += d; });
      s.on('close', () => resolve({ opened: received.length > 0, received }));
      s.on('error', (e) => resolve({ opened: false, error: String((e && (e.code || e.name)) || e) }));
      setTimeout(() => resolve({ opened: false, error: 'timeout' }), 3000);
    });
  } catch (e) { out.net = { opened: false, error: String((e && e.name) || e) }; }
  return Response.json(out);
} };`;

type Called = { url: string; status?: number; refused?: string | null; body?: string; error?: string };

describe('errors', () => {
  it('504 function_timeout: a function that only waits past its timeout leaves its runtime serving', async () => {
    await fns.deployed(token, project, 'slow', MODULES.sleep, '?timeout_ms=300');
    const warm = (await (await fns.invoke(token, project, 'slow')).json()) as { isolate: string };
    const runtime = runtimeOf(project);
    const started = Date.now();
    const r = await fns.invoke(token, project, 'slow', '?ms=5000');
    expect(r.status).toBe(504);
    expect(await errorOf(r)).toEqual({ code: 'function_timeout', message: 'function slow did not answer within its timeout of 300 ms' });
    expect(Date.now() - started).toBeLessThan(3000);
    // Its runtime answered the ping that follows a timeout: it is not stuck, and serves on.
    expect(alive(runtime.pid)).toBe(true);
    expect(((await (await fns.invoke(token, project, 'slow')).json()) as { isolate: string }).isolate).toBe(warm.isolate);
    expect(runtimeOf(project).pid).toBe(runtime.pid);
    const log = await logLines(project, 'slow');
    expect(log).toMatch(/ran past its timeout of 300 ms$/m);
    expect(log).not.toMatch(/killed/);
  });

  it('504 function_timeout: a function stuck in a loop has its runtime killed, the invocations beside it fail 502, the next gets a fresh runtime', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'stuck', MODULES.loop, '?timeout_ms=300');
    await fns.deployed(token, p, 'beside', MODULES.sleep);
    const warm = (await (await fns.invoke(token, p, 'stuck')).json()) as { isolate: string };
    expect((await fns.invoke(token, p, 'beside')).status).toBe(200);
    const runtime = runtimeOf(p);
    const startedBefore = state().started;
    // Another function of the project, in another isolate of the same runtime, in flight.
    const beside = fns.invoke(token, p, 'beside', '?ms=5000');
    await until(() => svc.agent.ctx.functions.inFlight(p) === 1);
    const started = Date.now();
    const r = await fns.invoke(token, p, 'stuck', '?loop');
    expect(r.status).toBe(504);
    expect(await errorOf(r)).toEqual({ code: 'function_timeout', message: 'function stuck did not answer within its timeout of 300 ms' });
    expect(Date.now() - started).toBeLessThan(3000);
    // The loop holds the runtime's one thread: it was killed before the 504 was answered.
    expect(alive(runtime.pid)).toBe(false);
    await until(() => !alive(runtime.workerd), 2000);
    const lost = await beside;
    expect(lost.status).toBe(502);
    const lostError = await errorOf(lost);
    expect(lostError.code).toBe('function_bad_output');
    expect(lostError.message).toMatch(/^function beside ended before answering: /);
    // The next invocation starts a fresh runtime, with fresh isolates.
    const next = await fns.invoke(token, p, 'stuck');
    expect(next.status).toBe(200);
    expect(((await next.json()) as { isolate: string }).isolate).not.toBe(warm.isolate);
    expect(runtimeOf(p).pid).not.toBe(runtime.pid);
    expect(state().started).toBe(startedBefore + 1);
    expect(await logLines(p, 'stuck')).toMatch(new RegExp(`ran past its timeout of 300 ms: its runtime \\(pid ${runtime.pid}\\) was stuck and is killed`));
    expect(await logLines(p, 'beside')).toMatch(new RegExp(`its runtime \\(pid ${runtime.pid}\\) ended during invocation req_[0-9a-f]+: `));
  });

  it('502 function_bad_output: the function throws (its stack in the logs, never in the answer)', async () => {
    await fns.deployed(token, project, 'throws', MODULES.throws);
    const r = await fns.invoke(token, project, 'throws');
    expect(r.status).toBe(502);
    expect(r.headers.get('x-request-id')).toMatch(/^req_/);
    expect(await errorOf(r)).toEqual({ code: 'function_bad_output', message: 'the function threw an exception (see its logs)' });
    expect(await logLines(project, 'throws')).toMatch(/stderr v1 Uncaught \(in fetch\): Error: kaboom/);
    // The runtime survives its function's exception.
    const runtime = runtimeOf(project);
    const exited = state().exited;
    expect((await fns.invoke(token, project, 'throws')).status).toBe(502);
    expect(runtimeOf(project).pid).toBe(runtime.pid);
    expect(state().exited).toBe(exited);
  });

  it('502 function_bad_output: the function returns something that is not a Response', async () => {
    await fns.deployed(token, project, 'string', MODULES.string);
    const r = await fns.invoke(token, project, 'string');
    expect(r.status).toBe(502);
    expect(await errorOf(r)).toEqual({ code: 'function_bad_output', message: 'the function returned a value that is not a Response' });
  });

  it('502 function_bad_output: the function calls process.exit (its invocation ends, its runtime serves on)', async () => {
    await fns.deployed(token, project, 'exits', MODULES.exits);
    await fns.deployed(token, project, 'fine', MODULES.hello);
    expect((await fns.invoke(token, project, 'fine')).status).toBe(200);
    const runtime = runtimeOf(project);
    const r = await fns.invoke(token, project, 'exits');
    expect(r.status).toBe(502);
    const error = await errorOf(r);
    expect(error.code).toBe('function_bad_output');
    // It loaded and ran: its invocation ended it, not a failure to start.
    expect(error.message).not.toMatch(/failed to start/);
    const log = await logLines(project, 'exits');
    expect(log).toMatch(/process\.exit\(3\)/);
    expect(log).not.toMatch(/failed to start/);
    expect((await fns.invoke(token, project, 'exits')).status).toBe(502);
    // process.exit is not the runtime's: it and the project's other functions serve on.
    expect(await (await fns.invoke(token, project, 'fine')).text()).toBe('ok');
    expect(runtimeOf(project).pid).toBe(runtime.pid);
  });

  it('502 function_bad_output: a module that fails to load only in the environment it runs in', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'needs', `if (process.env.MODE === 'broken') throw new Error('no'); export default { fetch() { return new Response('ok') } };`);
    expect((await svc.request('PUT', `/v0/projects/${p}/functions/secrets/MODE`, { token, body: { value: 'broken' } })).status).toBe(201);
    const r = await fns.invoke(token, p, 'needs');
    expect(r.status).toBe(502);
    expect(await errorOf(r)).toEqual({ code: 'function_bad_output', message: 'the function failed to start (see its logs)' });
    expect(await logLines(p, 'needs')).toMatch(/agent v1 the function failed to start: Error: no \(line 1\)/);
  });

  it('502 function_bad_output naming the memory limit: an isolate past its memory_mb ends its runtime, not the project\'s other runtimes', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'hog', MODULES.hog, '?memory_mb=48');
    await fns.deployed(token, p, 'beside', MODULES.sleep, '?memory_mb=48');
    await fns.deployed(token, p, 'other', MODULES.sleep);
    expect((await fns.invoke(token, p, 'beside')).status).toBe(200);
    const other = (await (await fns.invoke(token, p, 'other')).json()) as { isolate: string };
    const small = runtimeOf(p, 48);
    const large = runtimeOf(p, 128);
    const beside = fns.invoke(token, p, 'beside', '?ms=5000');
    await until(() => svc.agent.ctx.functions.inFlight(p) === 1);
    const r = await fns.invoke(token, p, 'hog');
    expect(r.status).toBe(502);
    expect(await errorOf(r)).toEqual({ code: 'function_bad_output', message: 'function hog ended before answering: it passed its memory limit of 48 MiB (memory_mb)' });
    expect(await logLines(p, 'hog')).toMatch(/its runtime \(pid \d+\) ended during invocation req_[0-9a-f]+: it passed its memory limit of 48 MiB \(memory_mb\)/);
    // The whole runtime went: the invocation beside it too.
    expect((await beside).status).toBe(502);
    await until(() => !alive(small.pid) && !alive(small.workerd));
    // The project's 128 MiB runtime is another process, untouched.
    expect(runtimeOf(p, 128).pid).toBe(large.pid);
    expect(((await (await fns.invoke(token, p, 'other')).json()) as { isolate: string }).isolate).toBe(other.isolate);
    // The next invocation at 48 MiB gets a fresh runtime.
    expect((await fns.invoke(token, p, 'beside')).status).toBe(200);
    expect(runtimeOf(p, 48).pid).not.toBe(small.pid);
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

  it('429 function_busy: the project\'s share of the agent (SVCD_FUNCTION_PROJECT_CONCURRENCY) is taken, by any of its functions; other projects are served meanwhile', async () => {
    const p = await newProject();
    const q = await newProject();
    await fns.deployed(token, p, 'wide', MODULES.sleep, '?max_concurrency=64');
    await fns.deployed(token, p, 'wider', MODULES.sleep, '?max_concurrency=64');
    await fns.deployed(token, q, 'wide', MODULES.sleep);
    const running = Array.from({ length: PROJECT_SHARE }, (_, i) => fns.invoke(token, p, i % 2 === 0 ? 'wide' : 'wider', '?ms=2000'));
    await until(() => svc.agent.ctx.functions.inFlight(p) >= PROJECT_SHARE, 15_000);
    for (const name of ['wide', 'wider']) {
      const r = await fns.invoke(token, p, name);
      expect(r.status).toBe(429);
      expect(r.headers.get('retry-after')).toBe('1');
      expect(await errorOf(r)).toEqual({
        code: 'function_busy',
        message: `project ${p} is already running ${PROJECT_SHARE} invocations (its share of this host, SVCD_FUNCTION_PROJECT_CONCURRENCY)`,
      });
    }
    expect((await fns.invoke(token, q, 'wide')).status).toBe(200);
    expect(svc.agent.ctx.functions.inFlight(p)).toBe(PROJECT_SHARE);
    expect((await Promise.all(running)).every((x) => x.status === 200)).toBe(true);
    expect((await fns.invoke(token, p, 'wide')).status).toBe(200);
  });

  it('429 function_busy: every runtime the agent may run (SVCD_FUNCTION_MAX_RUNTIMES) is busy; once one is idle it makes room', async () => {
    // One project, a runtime per memory_mb: as many busy runtimes as the agent may have.
    const p = await newProject();
    const sizes = [32, 64, 96];
    expect(sizes).toHaveLength(MAX_RUNTIMES);
    for (const mb of sizes) await fns.deployed(token, p, `m${mb}`, MODULES.sleep, `?memory_mb=${mb}`);
    const q = await newProject();
    await fns.deployed(token, q, 'late', MODULES.sleep);
    const running = sizes.map((mb) => fns.invoke(token, p, `m${mb}`, '?ms=2500'));
    await until(() => runtimesOf(state(), p).filter((r) => r.active === 1).length === MAX_RUNTIMES, 15_000);
    expect(state().runtimes).toHaveLength(MAX_RUNTIMES);
    const r = await fns.invoke(token, q, 'late');
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('1');
    expect(await errorOf(r)).toEqual({ code: 'function_busy', message: `all ${MAX_RUNTIMES} function runtimes of this host agent are busy` });
    expect((await Promise.all(running)).every((x) => x.status === 200)).toBe(true);
    // Idle now: the least recently used one is ended to start q's.
    const idle = state().runtimes.map((x) => x.pid);
    expect((await fns.invoke(token, q, 'late')).status).toBe(200);
    expect(state().runtimes).toHaveLength(MAX_RUNTIMES);
    expect(runtimesOf(state(), q)).toHaveLength(1);
    expect(runtimesOf(state(), p)).toHaveLength(MAX_RUNTIMES - 1);
    await until(() => idle.filter((pid) => !alive(pid)).length === 1);
  });

  it('503 function_runtime_missing when the runtime cannot start, and recovers once it can', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'cold', MODULES.hello);
    const link = join(workerdDir, 'workerd');
    renameSync(link, `${link}.away`);
    try {
      const r = await fns.invoke(token, p, 'cold');
      expect(r.status).toBe(503);
      expect((await errorOf(r)).code).toBe('function_runtime_missing');
      const d = await fns.deploy(token, p, 'other', MODULES.hello);
      expect(d.status).toBe(503);
      const refused = await errorOf(d);
      expect(refused.code).toBe('function_runtime_missing');
      expect(refused.message).toContain(link);
    } finally {
      renameSync(`${link}.away`, link);
    }
    // Probed again a few seconds after a failure (docs/functions.md "Runtimes"), not only at the agent's start.
    const deadline = Date.now() + 15_000;
    let status = 0;
    while (status !== 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      status = (await fns.invoke(token, p, 'cold')).status;
    }
    expect(status).toBe(200);
  });

  it('503 function_runtime_missing naming the binary when SVCD_FUNCTION_WORKERD names none: deploys and invocations', async () => {
    const missing = await startTestService({ SVCD_FUNCTION_WORKERD: '/nonexistent' });
    try {
      const client = new FunctionsClient((r) => missing.app.fetch(r));
      const { token: t } = await signup(missing);
      const p = await newProject(missing, t);
      const d = await client.deploy(t, p, 'fn', MODULES.hello);
      expect(d.status).toBe(503);
      const refused = await errorOf(d);
      expect(refused.code).toBe('function_runtime_missing');
      expect(refused.message).toContain('/nonexistent');
      // A function deployed before the binary went away (its items written as a deploy writes them).
      await putVersion(
        missing.db,
        { project: p, name: 'fn', sha256: '0'.repeat(64), size: 1, timeout_ms: 1000, memory_mb: 128, max_concurrency: 1, backend: 'fs', blob: 'never-read' },
        { actor: 'acct_0000000000000000', requestId: 'req_0', at: new Date().toISOString() },
        () => 'gen00001',
      );
      const r = await client.invoke(t, p, 'fn');
      expect(r.status).toBe(503);
      const unavailable = await errorOf(r);
      expect(unavailable.code).toBe('function_runtime_missing');
      expect(unavailable.message).toContain('/nonexistent');
      expect(missing.logs.join('\n')).toContain('workerd /nonexistent is not installed');
      expect(state(missing).runtimes).toEqual([]);
    } finally {
      await missing.stop();
    }
  });
});

describe('isolation', () => {
  it('a function reads neither the agent\'s state nor /etc/passwd, writes nothing to the host, spawns nothing, sees no agent setting', async () => {
    await fns.deployed(token, project, 'probe', MODULES.probe);
    const marker = `svc-function-probe-${randomBytes(6).toString('hex')}`;
    const root = svc.agent.ctx.root;
    const r = await fns.invoke(token, project, 'probe', `?dir=${encodeURIComponent(root)}&token=${marker}`);
    expect(r.status).toBe(200);
    const seen = (await r.json()) as Record<string, { ok: boolean; error?: string; value?: string }> & { agentSettings: string[] };
    for (const attempt of ['stateDir', 'stateDirPromises', 'stateDirBuiltin', 'passwd', 'passwdPromises', 'procSelf', 'write', 'writeState', 'sqlite', 'spawn', 'spawnBuiltin', 'worker', 'kill']) {
      expect(seen[attempt], attempt).toMatchObject({ ok: false });
    }
    expect(seen.agentSettings).toEqual([]);
    // What a function writes to its /tmp stays in its isolate: nothing reaches the host's disk.
    expect(existsSync(join('/tmp', marker))).toBe(false);
    expect(readdirSync(root).filter((n) => n.includes(marker))).toEqual([]);
  });

  it('a runtime runs as its project\'s own unprivileged user, without capabilities, in namespaces of its own, on a root of its own, in a cgroup', async () => {
    await warm(project);
    const runtime = runtimeOf(project);
    const pid = runtime.workerd;
    const uid = uidOf(project);
    expect(uid).toBeGreaterThanOrEqual(RUNTIME_UID_BASE);
    // Real, effective, saved and file-system ids.
    expect(statusField(pid, 'Uid')).toEqual([uid, uid, uid, uid].map(String));
    expect(statusField(pid, 'Gid')).toEqual([uid, uid, uid, uid].map(String));
    expect(readFileSync(`/proc/${pid}/status`, 'utf8')).toMatch(/^Groups:\s*$/m);
    for (const caps of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) expect(statusField(pid, caps), caps).toEqual(['0000000000000000']);
    expect(statusField(pid, 'NoNewPrivs')).toEqual(['1']);
    for (const kind of ['net', 'mnt', 'pid', 'ipc', 'uts']) expect(namespaceOf(pid, kind), kind).not.toBe(namespaceOf('self', kind));
    // PID 1 of its own PID namespace, which holds no other process.
    expect(statusField(pid, 'NSpid').at(-1)).toBe('1');
    expect(readdirSync(`/proc/${pid}/root/proc`).filter((n) => /^\d+$/.test(n))).toEqual(['1']);
    // Its root is its own: no host file is there.
    const rootEntries = readdirSync(`/proc/${pid}/root`);
    expect(rootEntries.filter((n) => !['bin', 'cfg', 'dev', 'in', 'lib', 'lib32', 'lib64', 'libx32', 'old', 'out', 'proc', 'usr'].includes(n))).toEqual([]);
    for (const path of ['etc/passwd', 'tmp', 'root', 'home', svc.agent.ctx.root.slice(1), REPO.slice(1)]) expect(existsSync(join(`/proc/${pid}/root`, path)), path).toBe(false);
    expect(readdirSync(`/proc/${pid}/root/old`)).toEqual([]);
    // Its network is a loopback interface and nothing else.
    const interfaces = readFileSync(`/proc/${pid}/net/dev`, 'utf8').split('\n').slice(2).map((l) => l.split(':')[0]!.trim()).filter(Boolean);
    expect(interfaces).toEqual(['lo']);
    // Its cgroup is the agent's group for it.
    const group = new RegExp(`/svc-${svc.agent.ctx.agentId}/fn-${project}-r128-\\d+$`);
    expect([...cgroupsOf(pid).values()].filter((g) => group.test(g)).length).toBeGreaterThan(0);
    // With its limits: memory, one core of CPU (SVCD_FUNCTION_CPU_PERCENT's default), tasks.
    expect(cgroupMemoryLimit(pid)).toBeGreaterThanOrEqual(runtimeMemoryMb(128, 1, PROJECT_MEMORY_MB) * MiB);
    expect(cgroupMemoryLimit(pid)).toBeLessThanOrEqual(runtimeMemoryMb(128, 64, PROJECT_MEMORY_MB) * MiB);
    expect(cgroupCpuPercent(pid)).toBe(100);
    if (existsSync('/sys/fs/cgroup/pids') || existsSync('/sys/fs/cgroup/cgroup.controllers')) expect(cgroupPidsMax(pid)).toBeGreaterThan(0);
    // Another project's runtime runs as another user.
    const other = await newProject();
    await fns.deployed(token, other, 'hello', MODULES.hello);
    expect((await fns.invoke(token, other, 'hello')).status).toBe(200);
    const theirs = runtimeOf(other).workerd;
    expect(statusField(theirs, 'Uid')[0]).toBe(String(uidOf(other)));
    expect(uidOf(other)).not.toBe(uid);
  });

  it('a runtime starts with an empty environment: nothing of the agent\'s, no host path', async () => {
    await warm(project);
    const { workerd } = runtimeOf(project);
    expect(readFileSync(`/proc/${workerd}/environ`, 'utf8')).toBe('');
  });

  it('runtimeState() names each runtime by the pid of its workerd process (the process whose memory and user are the runtime\'s)', async () => {
    await warm(project);
    const { pid, workerd } = runtimeOf(project);
    expect(commOf(pid)).toBe('workerd');
    expect(pid).toBe(workerd);
  });

  it('a runtime serves one project at one memory_mb: the isolates\' heap limit is it, the cgroup\'s memory limit follows its functions', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'small', MODULES.sleep, '?memory_mb=48');
    await fns.deployed(token, p, 'large', MODULES.sleep);
    expect((await fns.invoke(token, p, 'small')).status).toBe(200);
    expect((await fns.invoke(token, p, 'large')).status).toBe(200);
    const small = runtimeOf(p, 48);
    const large = runtimeOf(p, 128);
    expect(small.pid).not.toBe(large.pid);
    expect(readFileSync(`/proc/${small.workerd}/root/cfg/config.capnp`, 'utf8')).toContain('"--max-old-space-size=48"');
    expect(readFileSync(`/proc/${large.workerd}/root/cfg/config.capnp`, 'utf8')).toContain('"--max-old-space-size=128"');
    expect(cgroupMemoryLimit(small.workerd)).toBe(runtimeMemoryMb(48, 1, PROJECT_MEMORY_MB) * MiB);
    // A second function in that runtime: room for its memory_mb too.
    await fns.deployed(token, p, 'small2', MODULES.sleep, '?memory_mb=48');
    expect((await fns.invoke(token, p, 'small2')).status).toBe(200);
    expect(runtimeOf(p, 48).pid).toBe(small.pid);
    expect(cgroupMemoryLimit(small.workerd)).toBe(runtimeMemoryMb(48, 2, PROJECT_MEMORY_MB) * MiB);
    expect(runtimeMemoryMb(48, 2, PROJECT_MEMORY_MB)).toBeGreaterThan(runtimeMemoryMb(48, 1, PROJECT_MEMORY_MB));
  });

  it('a runtime past its memory bound is recycled: the next invocation starts a fresh runtime, the old one ends once drained', async () => {
    // Any workerd holds more than 1 MiB: the bound is passed from the first invocation on.
    const small = await startTestService({ SVCD_FUNCTION_WORKERD: join(workerdDir, 'workerd'), SVCD_FUNCTION_RECYCLE_MB: '1' });
    try {
      const client = new FunctionsClient((r) => small.app.fetch(r));
      const { token: t } = await signup(small);
      const p = await newProject(small, t);
      await client.deployed(t, p, 'sleep', MODULES.sleep);
      expect((await client.invoke(t, p, 'sleep')).status).toBe(200);
      const first = runtimeOf(p, 128, small);
      // Asked at most once a second per runtime (./limits.ts RECYCLE_CHECK_MS), when an invocation ends.
      await new Promise((r) => setTimeout(r, 1100));
      expect((await client.invoke(t, p, 'sleep')).status).toBe(200);
      expect((state(small) as RuntimeState & { recycled?: number }).recycled).toBeGreaterThanOrEqual(1);
      expect(small.logs.join('\n')).toMatch(/runtime \S+ \(pid \d+\) recycled: \d+ MiB resident, past its bound of 1 MiB/);
      expect((await client.invoke(t, p, 'sleep')).status).toBe(200);
      await until(() => !alive(first.workerd), 10_000);
      const next = runtimesOf(state(small), p, 128);
      expect(next.length).toBeGreaterThanOrEqual(1);
      expect(next.every((r) => r.pid !== first.pid)).toBe(true);
    } finally {
      await small.stop();
    }
  });

  it('SVCD_FUNCTION_SANDBOX=none warns at start, and runs isolates still: without the OS layer, never without their own limits', async () => {
    const bare = await startTestService({ SVCD_FUNCTION_SANDBOX: 'none' });
    const listener = await countingListener();
    try {
      expect(bare.logs.join('\n')).toMatch(/agent: WARNING: SVCD_FUNCTION_SANDBOX=none: function runtimes run without the OS sandbox/);
      const client = new FunctionsClient((r) => bare.app.fetch(r));
      const { token: t } = await signup(bare);
      const p = await newProject(bare, t);
      await client.deployed(t, p, 'sleep', MODULES.sleep);
      const warm = await client.invoke(t, p, 'sleep');
      expect(warm.status).toBe(200);
      const { isolate } = (await warm.json()) as { isolate: string };
      expect(isolate).toMatch(/^[0-9a-f-]{36}$/);
      // The runtime is workerd itself, as the agent's user, in the agent's namespaces: no OS layer.
      const runtime = runtimeOf(p, 128, bare);
      expect(runtime.workerd).toBe(runtime.pid);
      expect(statusField(runtime.pid, 'Uid')[1]).toBe(String(process.getuid!()));
      expect(namespaceOf(runtime.pid, 'net')).toBe(namespaceOf('self', 'net'));
      expect(readFileSync(`/proc/${runtime.pid}/environ`, 'utf8')).toBe('');
      // The isolates hold: the same attacks fail.
      await client.deployed(t, p, 'probe', MODULES.probe);
      const marker = `svc-function-probe-${randomBytes(6).toString('hex')}`;
      const seen = (await (await client.invoke(t, p, 'probe', `?dir=${encodeURIComponent(bare.agent.ctx.root)}&token=${marker}`)).json()) as Record<string, { ok: boolean }> & { agentSettings: string[] };
      for (const attempt of ['stateDir', 'stateDirPromises', 'stateDirBuiltin', 'passwd', 'passwdPromises', 'write', 'writeState', 'sqlite', 'spawn', 'spawnBuiltin', 'worker', 'kill']) {
        expect(seen[attempt], attempt).toMatchObject({ ok: false });
      }
      expect(seen.agentSettings).toEqual([]);
      expect(existsSync(join('/tmp', marker))).toBe(false);
      // So does the egress filter, though the runtime shares the host's network.
      await client.deployed(t, p, 'caller', CALLER);
      const [called] = (await (await client.invoke(t, p, 'caller', `?url=${encodeURIComponent(listener.url)}`)).json()) as Called[];
      expect(called).toMatchObject({ status: 403, refused: expect.stringMatching(/loopback/) });
      await client.deployed(t, p, 'raw', RAW_TCP);
      const raw = (await (await client.invoke(t, p, 'raw', `?host=127.0.0.1&port=${listener.port}`)).json()) as Record<string, { opened: boolean }>;
      expect(raw.sockets!.opened).toBe(false);
      expect(raw.net!.opened).toBe(false);
      expect(listener.connections()).toBe(0);
    } finally {
      listener.server.close();
      await bare.stop();
    }
  });
});

describe('egress', () => {
  let listener: Awaited<ReturnType<typeof countingListener>>;
  beforeAll(async () => {
    listener = await countingListener();
  });
  afterAll(() => listener?.server.close());

  it('refuses loopback, private and link-local destinations, by address or by name, with 403 and x-svc-egress-refused; the listener is never reached', async () => {
    await fns.deployed(token, project, 'caller', CALLER);
    const before = state().egress;
    const port = listener.port;
    const urls = [
      listener.url,
      `http://localhost:${port}/`,
      `http://[::1]:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
      `http://127.1.2.3:${port}/`,
      'http://169.254.169.254/latest/meta-data/',
      'http://10.0.0.1/',
      'http://192.168.1.1/',
      'http://[fd00::1]/',
    ];
    const r = await fns.invoke(token, project, 'caller', `?${urls.map((u) => `url=${encodeURIComponent(u)}`).join('&')}`);
    expect(r.status).toBe(200);
    const called = (await r.json()) as Called[];
    expect(called).toHaveLength(urls.length);
    for (const c of called) {
      expect(c.status, c.url).toBe(403);
      expect(c.refused, c.url).toBeTruthy();
      expect(c.body, c.url).toMatch(/^egress refused: /);
    }
    expect(called[0]!.refused).toMatch(/loopback/);
    expect(called[1]!.refused).toMatch(/localhost resolves only to addresses not reachable from functions/);
    expect(called[5]!.refused).toMatch(/link-local/);
    expect(called[6]!.refused).toMatch(/private/);
    expect(listener.connections()).toBe(0);
    expect(state().egress.refused - before.refused).toBe(urls.length);
    expect(state().egress.passed).toBe(before.passed);
    // Raw TCP has no way out either.
    await fns.deployed(token, project, 'raw', RAW_TCP);
    const raw = (await (await fns.invoke(token, project, 'raw', `?host=127.0.0.1&port=${port}`)).json()) as Record<string, { opened: boolean }>;
    expect(raw.sockets!.opened).toBe(false);
    expect(raw.net!.opened).toBe(false);
    expect(listener.connections()).toBe(0);
  });

  it('reaches a local listener end to end through the sandbox when SVCD_FUNCTION_EGRESS_UNSAFE_ALLOW names it (warned at start), and it alone', async () => {
    const allowed = await startTestService({ SVCD_FUNCTION_EGRESS_UNSAFE_ALLOW: `127.0.0.1:${listener.port}` });
    try {
      expect(allowed.logs.join('\n')).toContain(`agent: WARNING: SVCD_FUNCTION_EGRESS_UNSAFE_ALLOW lets functions reach 127.0.0.1:${listener.port} whatever their address`);
      const client = new FunctionsClient((r) => allowed.app.fetch(r));
      const { token: t } = await signup(allowed);
      const p = await newProject(allowed, t);
      await client.deployed(t, p, 'caller', CALLER);
      const other = await countingListener();
      try {
        const urls = [listener.url, `http://localhost:${listener.port}/`, other.url];
        const called = (await (await client.invoke(t, p, 'caller', `?${urls.map((u) => `url=${encodeURIComponent(u)}`).join('&')}`)).json()) as Called[];
        expect(called[0]).toMatchObject({ status: 200, refused: null, body: 'from the host' });
        expect(listener.connections()).toBeGreaterThanOrEqual(1);
        // Only that host and port: the same port by another name, and another port, are refused.
        expect(called[1]).toMatchObject({ status: 403, refused: expect.any(String) });
        expect(called[2]).toMatchObject({ status: 403, refused: expect.stringMatching(/loopback/) });
        expect(other.connections()).toBe(0);
      } finally {
        other.server.close();
      }
      expect(state(allowed).egress.passed).toBeGreaterThanOrEqual(1);
      expect(allowed.logs.join('\n')).toContain(`egress of ${p} to 127.0.0.1:${listener.port} let through by SVCD_FUNCTION_EGRESS_UNSAFE_ALLOW`);
      // Through the OS sandbox: the runtime that reached it has no network of its own.
      const runtime = runtimeOf(p, 128, allowed);
      expect(namespaceOf(runtime.workerd, 'net')).not.toBe(namespaceOf('self', 'net'));
    } finally {
      await allowed.stop();
    }
  });
});

describe('lifecycle of the project and the agent', () => {
  it('a project is not deleted while an invocation of it runs (409), then is: its functions and its runtime are gone', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'busy', MODULES.sleep);
    const running = fns.invoke(token, p, 'busy', '?ms=1500');
    await until(() => svc.agent.ctx.functions.inFlight(p) === 1 && runtimesOf(state(), p).length === 1);
    const runtime = runtimeOf(p);
    const refused = await svc.request('DELETE', `/v0/projects/${p}`, { token });
    expect(refused.status).toBe(409);
    expect((await errorOf(refused)).message).toMatch(/a function invocation of the project is in progress/);
    expect((await running).status).toBe(200);
    expect((await svc.request('DELETE', `/v0/projects/${p}`, { token })).status).toBe(200);
    expect((await fns.invoke(token, p, 'busy')).status).toBe(404);
    expect(existsSync(join(svc.agent.ctx.root, 'functions', p))).toBe(false);
    await until(() => !alive(runtime.pid) && !alive(runtime.workerd));
    expect(runtimesOf(state(), p)).toEqual([]);
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
    const store = svc.agent.ctx.blobs;
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

  it('an agent restart loses no deployed function; its runtimes end with it', async () => {
    const p = await newProject();
    await fns.deployed(token, p, 'kept', MODULES.sleep);
    const first = (await (await fns.invoke(token, p, 'kept')).json()) as { isolate: string };
    const runtimes = state().runtimes.map((r) => ({ pid: r.pid, workerd: workerdOf(r.pid) }));
    expect(runtimes.length).toBeGreaterThan(0);
    await svc.agent.stop();
    await until(() => runtimes.every((r) => !alive(r.pid) && (r.workerd === null || !alive(r.workerd))));
    restarted = await startAgent(loadSettings(svc.env), { db: svc.db, cwd: REPO, log: (line) => svc.logs.push(line) });
    const r = await fns.invoke(token, p, 'kept');
    expect(r.status).toBe(200);
    expect(((await r.json()) as { isolate: string }).isolate).not.toBe(first.isolate);
    const now = restarted.ctx.functions.runtimeState();
    expect(runtimesOf(now, p)).toHaveLength(1);
    expect(runtimes.map((x) => x.pid)).not.toContain(runtimesOf(now, p)[0]!.pid);
  });
});

describe('deploy checks', () => {
  /** Pids of the project's throwaway check runtimes now (their cgroup names them, host-agent/functions/runtime.ts). */
  function checkRuntimes(p: string): number[] {
    const found: number[] = [];
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        if (readFileSync(`/proc/${entry}/cgroup`, 'utf8').includes(`/fn-${p}-c`) && readFileSync(`/proc/${entry}/cmdline`, 'utf8').startsWith('/bin/workerd')) found.push(Number(entry));
      } catch {
        // Gone meanwhile.
      }
    }
    return found;
  }

  it('runs one throwaway runtime at a time per project, however many of its functions deploy at once', { timeout: 60_000 }, async () => {
    const p = await newProject();
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        most = Math.max(most, checkRuntimes(p).length);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const deploys = await Promise.all(['c1', 'c2', 'c3', 'c4'].map((name) => fns.deploy(token, p, name, MODULES.hello)));
    sampling = false;
    await sampler;
    expect(deploys.map((r) => r.status)).toEqual([201, 201, 201, 201]);
    expect(most).toBe(1);
    expect(checkRuntimes(p)).toEqual([]);
  });
});
