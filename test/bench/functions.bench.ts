/**
 * Function invocation (docs/functions.md "Benchmark"), each figure beside its baseline in the same run:
 *
 *   - warm invoke, concurrency 1: p50 through the service minus the p50 of the same module served by
 *     the bare runtime (workerd with the module as its one worker, in its own process, over TCP)
 *     (target <= 1 ms added);
 *   - warm throughput at concurrency 16 through the service ÷ that bare runtime (target >= 0.5);
 *   - cold start: the first invocation of a new version, p50 (target <= 50 ms), beside the bare
 *     runtime's own cold start (spawn to first answer);
 *   - memory per idle deployed function: the resident memory of the project's runtime (every process
 *     of its sandbox) with FUNCTIONS functions deployed and warm, divided by FUNCTIONS (target
 *     <= 10 MiB), beside the bare runtime's with one module.
 *
 *   node_modules/.bin/node test/bench/functions.bench.ts [seconds-per-round]
 *
 * Real pieces only, as production serves invocations: DynamoDB Local, the host agent as its own
 * process (bin/svc-agent) with its runtimes in their OS sandbox, and the handlers' Node entry
 * (dist/node-server.mjs, the Node workers invocations are routed to, docs/deploy.md) in a process
 * of its own; the client is an undici Pool with a project key (the agent verifies it from memory).
 * Service and baseline rounds alternate so drift on the shared machine hits both. Build first
 * (`npm run bench` does).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool, request } from 'undici';
import { freePort, startDynamoLocal } from '../../infra/local/dynamodb.ts';
import { packagedWorkerd } from '../../host-agent/functions/launch.ts';
import { FUNCTION_COMPATIBILITY_DATE, FUNCTION_COMPATIBILITY_FLAGS } from '../../host-agent/functions/workerd-config.ts';
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
/** Functions deployed for the memory figure. */
const FUNCTIONS = 20;

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

/** Resolves once something accepts connections on 127.0.0.1:`port`. */
async function listening(port: number, child: ChildProcess): Promise<void> {
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error('the bare runtime exited during start');
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(1);
  }
}

/**
 * The bare runtime of the baselines: workerd with the module as its only worker, on a TCP port,
 * with the functions' compatibility date and flags; nothing else between the client and the module.
 */
async function bareRuntime(dir: string, modulePath: string): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const config = join(dir, `bare-${port}.capnp`);
  writeFileSync(
    config,
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "main", worker = (modules = [ (name = "main.js", esModule = embed ${JSON.stringify(basename(modulePath))}) ],
    compatibilityDate = ${JSON.stringify(FUNCTION_COMPATIBILITY_DATE)}, compatibilityFlags = ${JSON.stringify(FUNCTION_COMPATIBILITY_FLAGS)})) ],
  sockets = [ (name = "http", address = "127.0.0.1:${port}", http = (), service = "main") ],
);
`,
  );
  const child = spawn(packagedWorkerd()!, ['serve', config], { stdio: ['ignore', 'ignore', 'inherit'] });
  await listening(port, child);
  return { child, port };
}

/** One cold answer of the bare runtime: spawn workerd with the module, one request, stop. */
async function bareCold(dir: string, modulePath: string): Promise<number> {
  const t0 = performance.now();
  const { child, port } = await bareRuntime(dir, modulePath);
  const r = await request(`http://127.0.0.1:${port}/`);
  await r.body.text();
  const elapsed = performance.now() - t0;
  child.kill('SIGKILL');
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

/** The processes of the agent's function runtimes (each sandbox's holder and workerd). */
function runtimePids(agentPid: number): number[] {
  return descendants(agentPid).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('workerd');
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
    SVCD_FUNCTION_PROJECT_CONCURRENCY: String(CONCURRENCY * 4),
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
    const deploy = (name: string, source: string) => call('PUT', `/v0/projects/${project.id}/functions/${name}?max_concurrency=${CONCURRENCY * 2}`, token, source, 'application/javascript');
    await deploy('hello', MODULES.hello);
    const path = `/v0/projects/${project.id}/functions/hello/invoke`;
    const auth = { authorization: `Bearer ${key}` };
    const service = new Pool(base, { connections: CONCURRENCY });
    const bareStarted = await bareRuntime(root, modulePath);
    bare = bareStarted.child;
    const barePool = new Pool(`http://127.0.0.1:${bareStarted.port}`, { connections: CONCURRENCY });

    // Warm, concurrency 1: the service against the bare runtime, alternating.
    await load(service, path, auth, 1500, 1);
    await load(barePool, '/', {}, 500, 1);
    const warm = { service: [] as number[], bare: [] as number[], session: [] as number[] };
    for (let i = 0; i < ROUNDS; i++) {
      warm.service.push(...(await load(service, path, auth, (SECONDS * 1000) / 2, 1)).latencies);
      warm.session.push(...(await load(service, path, { authorization: `Bearer ${token}` }, 500, 1)).latencies);
      warm.bare.push(...(await load(barePool, '/', {}, (SECONDS * 1000) / 2, 1)).latencies);
    }

    // Warm throughput at concurrency 16, alternating.
    await load(service, path, auth, 2000, CONCURRENCY);
    await load(barePool, '/', {}, 1000, CONCURRENCY);
    const through = { service: [] as number[], bare: [] as number[], errors: 0 };
    for (let i = 0; i < ROUNDS; i++) {
      const s = await load(service, path, auth, SECONDS * 1000, CONCURRENCY);
      const b = await load(barePool, '/', {}, SECONDS * 1000, CONCURRENCY);
      through.service.push(s.rps);
      through.bare.push(b.rps);
      through.errors += s.errors + b.errors;
    }
    const bareRss = rssMiB(bare.pid!);
    await barePool.close();
    await stop(bare);
    bare = undefined;

    // Cold: the first invocation of a new version (deployed, not yet invoked), against the bare
    // runtime's own cold start, alternating.
    const cold = { service: [] as number[], bare: [] as number[] };
    await bareCold(root, modulePath);
    for (let i = 0; i < COLD_RUNS; i++) {
      await deploy('hello', `${MODULES.hello}\n// version ${i + 2}\n`);
      const t0 = performance.now();
      const r = await service.request({ method: 'GET', path, headers: auth });
      if ((await r.body.text()) !== 'ok') throw new Error(`cold invoke answered ${r.statusCode}`);
      cold.service.push(performance.now() - t0);
      cold.bare.push(await bareCold(root, modulePath));
    }

    // Memory: FUNCTIONS functions deployed and warm (each invoked), then idle.
    for (let i = 0; i < FUNCTIONS; i++) {
      await deploy(`f${i}`, MODULES.hello);
      const r = await service.request({ method: 'GET', path: `/v0/projects/${project.id}/functions/f${i}/invoke`, headers: auth });
      if ((await r.body.text()) !== 'ok') throw new Error(`f${i} answered ${r.statusCode}`);
    }
    await sleep(500);
    const pids = runtimePids(agent!.pid!);
    const rss = pids.map(rssMiB).filter((n) => !Number.isNaN(n));
    const total = rss.reduce((a, b) => a + b, 0);
    // The runtime also still holds the "hello" versions invoked above.
    const perFunction = total / (FUNCTIONS + 1);

    const added = p50(warm.service) - p50(warm.bare);
    const rate = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const throughput = rate(through.service) / rate(through.bare);
    const mark = (ok: boolean) => (ok ? 'ok' : 'MISSED');
    console.log(`functions: GET of a module answering "ok", through dist/node-server.mjs and the host agent (runtimes in the OS sandbox) with a project key`);
    console.log(`warm p50, concurrency 1 ${p50(warm.service).toFixed(3)} ms through the service; ${p50(warm.bare).toFixed(3)} ms the bare runtime (workerd, own process)`);
    console.log(`warm added p50          ${added.toFixed(3)} ms   (target <= 1 ms)   ${mark(added <= 1)}`);
    console.log(`warm p50 with a session ${p50(warm.session).toFixed(3)} ms (info: one DynamoDB read per invocation judges the session and the project)`);
    console.log(`throughput, c=${CONCURRENCY}        ${rate(through.service).toFixed(0)} req/s through the service; ${rate(through.bare).toFixed(0)} req/s the bare runtime`);
    console.log(`throughput ratio        ${throughput.toFixed(3)}   (target >= 0.5)   ${mark(throughput >= 0.5)}   (${through.errors} errors)`);
    console.log(`cold start p50          ${p50(cold.service).toFixed(1)} ms, first invocation of a new version   (target <= 50 ms)   ${mark(p50(cold.service) <= 50)}; bare runtime spawn to first answer ${p50(cold.bare).toFixed(1)} ms (${COLD_RUNS} runs each, alternating)`);
    console.log(`memory per idle function ${perFunction.toFixed(1)} MiB   (target <= 10 MiB)   ${mark(perFunction <= 10)}   (${total.toFixed(1)} MiB in ${pids.length} runtime processes for ${FUNCTIONS + 1} warm functions; the bare runtime with one module: ${bareRss.toFixed(1)} MiB)`);
    const [load1] = readFileSync('/proc/loadavg', 'utf8').split(' ') as [string];
    console.log(`machine: ${cpus().length} cores, load average ${load1} (other work on the machine colours the wall-clock figures)`);
    if (through.errors) process.exitCode = 1;
    await service.close();
  } finally {
    await stop(bare);
    await stop(handlers);
    await stop(agent);
    await dynamo.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
