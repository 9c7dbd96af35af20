/**
 * Function invocation (docs/functions.md "Benchmark"), each figure beside its baseline in the same run:
 *
 *   - cold invoke p50 ÷ a bare `node` process importing the same module and answering one request
 *     (spawn to answer, target ≤ 1.3);
 *   - warm invoke, concurrency 1: p50 through the service minus the p50 of calling the module's
 *     `fetch` in this process (target ≤ 1 ms added);
 *   - warm throughput at concurrency 16 through the service ÷ the same module in a bare Node HTTP
 *     server (its own process, target ≥ 0.5);
 *   - RSS per idle warm worker.
 *
 *   node_modules/.bin/node test/bench/functions.bench.ts [seconds-per-round]
 *
 * Real pieces only, as production serves invocations: DynamoDB Local, the host agent as its own
 * process (bin/svc-agent) with its workers, and the handlers' Node entry (dist/node-server.mjs, the
 * Node workers invocations are routed to, docs/deploy.md) in a process of its own; the client is an
 * undici Pool with a project key (the agent verifies it from memory). Service and baseline rounds
 * alternate so drift on the shared machine hits both. Build first (`npm run bench` does).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Pool, request } from 'undici';
import { startDynamoLocal } from '../../infra/local/dynamodb.ts';
import { loadSettings } from '../../shared/config.ts';
import { createDb, ensureTable } from '../../shared/db/client.ts';
import { deploymentEnv } from '../helpers/deployment-env.ts';
import { MODULES } from '../helpers/functions.ts';
import { descendants } from '../helpers/procs.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const SECONDS = Number(process.argv[2] ?? 4);
const ROUNDS = 3;
const CONCURRENCY = 16;
const COLD_RUNS = 12;
/** The agent's idle delay: a cold invocation is one made after the worker has gone. */
const IDLE_MS = 1000;

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}
const p50 = (xs: number[]) => quantile([...xs].sort((a, b) => a - b), 0.5);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts `argv` and resolves with its first stdout line. */
function startWithLine(argv: string[], env: Record<string, string>): Promise<{ child: ChildProcess; line: string }> {
  const [command, ...args] = argv;
  const child = spawn(command!, args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const nl = out.indexOf('\n');
      if (nl >= 0) resolve({ child, line: out.slice(0, nl) });
    });
    child.once('exit', (code) => reject(new Error(`${argv.join(' ')} exited ${code} during start`)));
  });
}

async function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(t);
}

/** The bare server of the throughput baseline: the module behind node:http, nothing else. */
function bareServerSource(modulePath: string): string {
  return `
import { createServer } from 'node:http';
import { Readable } from 'node:stream';
const mod = await import(${JSON.stringify(pathToFileURL(modulePath).href)});
const server = createServer(async (req, res) => {
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  const request = new Request('http://bare' + req.url, { method: req.method, headers: req.headers, body: hasBody ? Readable.toWeb(req) : null, duplex: 'half' });
  const response = await mod.default.fetch(request, {}, { waitUntil() {}, passThroughOnException() {} });
  res.writeHead(response.status, [...response.headers].flat());
  if (response.body) for await (const chunk of response.body) res.write(chunk);
  res.end();
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));`;
}

/** One cold answer of the baseline: spawn a node that imports the module, serves one request, exits. */
async function bareCold(modulePath: string): Promise<number> {
  const script = `${bareServerSource(modulePath)}\nserver.on('request', (_q, s) => s.on('finish', () => server.close()));`;
  const t0 = performance.now();
  const { child, line } = await startWithLine([process.execPath, '--input-type=module', '-e', script], {});
  const r = await request(`http://127.0.0.1:${line.trim()}/`);
  await r.body.text();
  const elapsed = performance.now() - t0;
  await stop(child);
  return elapsed;
}

/** `concurrency` loops of GET `path` on `pool` for `ms`; answers latencies and the rate. */
async function load(pool: Pool, path: string, headers: Record<string, string>, ms: number, concurrency: number): Promise<{ latencies: number[]; rps: number; errors: number }> {
  const latencies: number[] = [];
  let errors = 0;
  const start = performance.now();
  const end = start + ms;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        const r = await pool.request({ method: 'GET', path, headers });
        const text = await r.body.text();
        if (r.statusCode !== 200 || text !== 'ok') errors++;
        latencies.push(performance.now() - t0);
      }
    }),
  );
  return { latencies, rps: latencies.length / ((performance.now() - start) / 1000), errors };
}

/** The agent's worker processes (their command line carries the permission model). */
function workerPids(agentPid: number): number[] {
  return descendants(agentPid).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--permission');
    } catch {
      return false;
    }
  });
}

function rssMiB(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
  } catch {
    return NaN;
  }
}

async function main(): Promise<void> {
  const dynamo = await startDynamoLocal();
  const root = mkdtempSync(join(tmpdir(), 'svc-bench-functions-'));
  const modulePath = join(root, 'hello.mjs');
  writeFileSync(modulePath, MODULES.hello);
  const env = deploymentEnv(dynamo.endpoint, {
    SVCD_TABLE: `bench_${randomBytes(4).toString('hex')}`,
    SVCD_ROOT: join(root, 'agent'),
    SVCD_HEARTBEAT_MS: '600000',
    SVCD_AGENT_STALE_MS: '3600000',
    SVCD_FUNCTION_IDLE_MS: String(IDLE_MS),
    SVCD_FUNCTION_MAX_WORKERS: String(CONCURRENCY * 2),
  });
  await ensureTable(createDb(loadSettings(env)));
  let agent: ChildProcess | undefined;
  let handlers: ChildProcess | undefined;
  let bare: ChildProcess | undefined;
  try {
    ({ child: agent } = await startWithLine([join(REPO, 'bin/svc-agent')], env));
    const node = await startWithLine([join(REPO, 'node_modules/.bin/node'), join(REPO, 'dist/node-server.mjs')], { ...env, SVCD_PORT: '0', SVCD_LOG_LEVEL: 'warn' });
    handlers = node.child;
    const base = (JSON.parse(node.line) as { url: string }).url;
    const call = async (method: string, path: string, token?: string, body?: string, type = 'application/json') => {
      const r = await fetch(`${base}${path}`, { method, headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), 'content-type': type }, body });
      if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
      return (await r.json()) as any;
    };
    const { token } = await call('POST', '/v0/signup', undefined, '{}');
    const project = await call('POST', '/v0/projects', token, '{"name":"bench"}');
    const { key } = await call('POST', `/v0/projects/${project.id}/keys`, token, '{}');
    await call('PUT', `/v0/projects/${project.id}/functions/hello?max_concurrency=${CONCURRENCY}`, token, MODULES.hello, 'application/javascript');
    const path = `/v0/projects/${project.id}/functions/hello/invoke`;
    const auth = { authorization: `Bearer ${key}` };
    const service = new Pool(base, { connections: CONCURRENCY });

    // Cold: the service after its worker has idled out, against a bare node process, alternating.
    const cold = { service: [] as number[], bare: [] as number[] };
    await bareCold(modulePath);
    for (let i = 0; i < COLD_RUNS; i++) {
      await sleep(IDLE_MS + 400);
      const t0 = performance.now();
      const r = await service.request({ method: 'GET', path, headers: auth });
      if ((await r.body.text()) !== 'ok') throw new Error(`cold invoke answered ${r.statusCode}`);
      cold.service.push(performance.now() - t0);
      cold.bare.push(await bareCold(modulePath));
    }

    // Warm, concurrency 1: the service against the module's fetch called in this process.
    const mod = (await import(pathToFileURL(modulePath).href)) as { default: { fetch(r: Request, e: unknown, c: unknown): Promise<Response> | Response } };
    const inProcess: number[] = [];
    const inProcessFor = async (ms: number) => {
      const end = performance.now() + ms;
      while (performance.now() < end) {
        const t0 = performance.now();
        const response = await mod.default.fetch(new Request('http://svc.test/'), {}, { waitUntil() {}, passThroughOnException() {} });
        await response.text();
        inProcess.push(performance.now() - t0);
      }
    };
    await load(service, path, auth, 1500, 1);
    await inProcessFor(500);
    inProcess.length = 0;
    const warm1: number[] = [];
    const warmSession: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      warm1.push(...(await load(service, path, auth, (SECONDS * 1000) / 2, 1)).latencies);
      warmSession.push(...(await load(service, path, { authorization: `Bearer ${token}` }, 500, 1)).latencies);
      await inProcessFor((SECONDS * 1000) / 2);
    }

    // Warm throughput at concurrency 16: the service against a bare Node HTTP server with the module.
    const started = await startWithLine([process.execPath, '--input-type=module', '-e', bareServerSource(modulePath)], {});
    bare = started.child;
    const barePool = new Pool(`http://127.0.0.1:${started.line.trim()}`, { connections: CONCURRENCY });
    await load(service, path, auth, 2000, CONCURRENCY);
    await load(barePool, '/', {}, 1000, CONCURRENCY);
    const through = { service: [] as number[], bare: [] as number[], errors: 0 };
    let rss: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const s = await load(service, path, auth, SECONDS * 1000, CONCURRENCY);
      // The workers that served the round, idle now (well within IDLE_MS).
      await sleep(100);
      if (i === ROUNDS - 1) rss = workerPids(agent!.pid!).map(rssMiB).filter((n) => !Number.isNaN(n));
      const b = await load(barePool, '/', {}, SECONDS * 1000, CONCURRENCY);
      through.service.push(s.rps);
      through.bare.push(b.rps);
      through.errors += s.errors + b.errors;
    }

    const coldRatio = p50(cold.service) / p50(cold.bare);
    const added = p50(warm1) - p50(inProcess);
    const rate = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const throughput = rate(through.service) / rate(through.bare);
    const mark = (ok: boolean) => (ok ? 'ok' : 'MISSED');
    console.log(`functions: GET of a module answering "ok", through dist/node-server.mjs and the host agent with a project key`);
    console.log(`cold invoke p50         ${p50(cold.service).toFixed(1)} ms; bare node importing the module and answering one request ${p50(cold.bare).toFixed(1)} ms`);
    console.log(`cold ratio              ${coldRatio.toFixed(3)}   (target <= 1.3)   ${mark(coldRatio <= 1.3)}   (${COLD_RUNS} runs each, alternating)`);
    console.log(`warm p50, concurrency 1 ${p50(warm1).toFixed(3)} ms through the service; ${(p50(inProcess) * 1000).toFixed(1)} µs calling fetch in process`);
    console.log(`warm added p50          ${added.toFixed(3)} ms   (target <= 1 ms)   ${mark(added <= 1)}`);
    console.log(`warm p50 with a session ${p50(warmSession).toFixed(3)} ms (info: one DynamoDB read per invocation judges the session and the project)`);
    console.log(`throughput, c=${CONCURRENCY}        ${rate(through.service).toFixed(0)} req/s through the service; ${rate(through.bare).toFixed(0)} req/s bare Node HTTP server`);
    console.log(`throughput ratio        ${throughput.toFixed(3)}   (target >= 0.5)   ${mark(throughput >= 0.5)}   (${through.errors} errors)`);
    console.log(`RSS per idle warm worker ${rss.length ? (rss.reduce((a, b) => a + b, 0) / rss.length).toFixed(1) : 'n/a'} MiB (${rss.length} idle workers: ${rss.map((n) => n.toFixed(1)).join(', ')})`);
    const [load1] = readFileSync('/proc/loadavg', 'utf8').split(' ') as [string];
    console.log(`machine: ${cpus().length} cores, load average ${load1} (other work on the machine colours the wall-clock figures)`);
    if (through.errors) process.exitCode = 1;
    await service.close();
    await barePool.close();
  } finally {
    await stop(bare);
    await stop(handlers);
    await stop(agent);
    await dynamo.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
