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
 * and, for information, the resident memory of the project's runtime (every process of its sandbox)
 * after each throughput round and at the end; with `soak-seconds`, a soak at concurrency 4 that
 * samples it every 10 s (docs/functions.md "Memory over time": workerd keeps what its allocator took,
 * and a runtime past its bound is recycled, which shows as a new pid):
 *
 *   node_modules/.bin/node test/bench/functions.bench.ts [seconds-per-round] [soak-seconds]
 *
 * Real pieces only, through {base_url}: the local stack as `npm start` runs it (its front, the
 * handlers in miniflare, one host agent with its runtimes in the OS sandbox) on DynamoDB Local; the
 * client is an undici Pool with a project key, whose invocations the front hands to the agent
 * (docs/functions.md "The path through the service"). The handlers' Node entry
 * (dist/node-server.mjs, the production Node workers) is measured beside it for information.
 * Service and baseline rounds alternate so drift on the shared machine hits both. Build first
 * (`npm run bench` does).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool, request } from 'undici';
import { freePort, startDynamoLocal } from '../../infra/local/dynamodb.ts';
import { packagedWorkerd } from '../../host-agent/functions/launch.ts';
import { FUNCTION_COMPATIBILITY_DATE, FUNCTION_COMPATIBILITY_FLAGS } from '../../host-agent/functions/workerd-config.ts';
import { startStack, type Stack } from '../../infra/local/stack.ts';
import { MODULES } from '../helpers/functions.ts';
import { descendants } from '../helpers/procs.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const SECONDS = Number(process.argv[2] ?? 4);
const SOAK_SECONDS = Number(process.argv[3] ?? 0);
const SOAK_CONCURRENCY = 4;
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

/**
 * The ceiling of any design with one process between the client and the runtime (as the agent is):
 * a bare Node relay, node:http in front of an undici Pool to the bare runtime, streaming both ways,
 * nothing else. Prints its port.
 */
function bareRelaySource(port: number): string {
  return `
import { createServer } from 'node:http';
import { Pool } from ${JSON.stringify(join(REPO, 'node_modules/undici/index.js'))};
const pool = new Pool('http://127.0.0.1:${port}', { connections: 64 });
const server = createServer((req, res) => {
  pool.request({ method: req.method, path: req.url, headers: req.headers, body: req.method === 'GET' || req.method === 'HEAD' ? null : req }).then(
    (r) => { res.writeHead(r.statusCode, r.headers); r.body.pipe(res); },
    () => { res.writeHead(502); res.end(); },
  );
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));`;
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
        if (r.statusCode !== 200 || text !== 'ok') {
          if (errors++ === 0) console.error(`${path}: answered ${r.statusCode} ${text.slice(0, 200)}`);
        }
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

/** The resident memory of every runtime process the agent started now, and their pids. */
function runtimeRss(agentPid: number): { mib: number; pids: number[] } {
  const pids = runtimePids(agentPid);
  return { mib: pids.map(rssMiB).filter((n) => !Number.isNaN(n)).reduce((a, b) => a + b, 0), pids };
}

/**
 * `concurrency` loops of GET `path` for `seconds`, the runtime's resident memory sampled every 10 s;
 * answers the samples (`<seconds>s <MiB>`) and how many runtime processes were seen (a recycled
 * runtime is replaced by a fresh one).
 */
async function soak(pool: Pool, path: string, headers: Record<string, string>, seconds: number, agentPid: number): Promise<{ samples: string[]; pids: number; rps: number; errors: number }> {
  const samples: string[] = [];
  const seen = new Set<number>();
  const t0 = performance.now();
  const sample = () => {
    const { mib, pids } = runtimeRss(agentPid);
    for (const pid of pids) seen.add(pid);
    samples.push(`${Math.round((performance.now() - t0) / 1000)}s ${mib.toFixed(0)}`);
  };
  sample();
  const timer = setInterval(sample, 10_000);
  const run = await load(pool, path, headers, seconds * 1000, SOAK_CONCURRENCY);
  clearInterval(timer);
  sample();
  return { samples, pids: seen.size, rps: run.rps, errors: run.errors };
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
  // The local stack's directory is others-searchable, as npm start's .svc is (engines and runtimes run as their own users).
  chmodSync(root, 0o755);
  const modulePath = join(root, 'hello.mjs');
  writeFileSync(modulePath, MODULES.hello);
  let stack: Stack | undefined;
  let handlers: ChildProcess | undefined;
  let bare: ChildProcess | undefined;
  let relay: ChildProcess | undefined;
  try {
    // {base_url}: the local stack as npm start runs it (front, miniflare, one agent with its runtimes in the OS sandbox).
    stack = await startStack({
      dir: join(root, 'stack'),
      dynamoEndpoint: dynamo.endpoint,
      env: { SVCD_TABLE: `bench_${randomBytes(4).toString('hex')}`, SVCD_PORT: '0', SVCD_AGENT_PORT: '0', SVCD_DATAPLANE_PORT: '0', SVCD_FUNCTION_PROJECT_CONCURRENCY: String(CONCURRENCY * 4), SVCD_LOG_LEVEL: 'warn' },
      agentOutput: 'collect',
      log: () => {},
    });
    const base = stack.url;
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
    // The production Node workers' entry beside it (information: the path a load balancer sends invocations to).
    const node = await startWithLine([join(REPO, 'node_modules/.bin/node'), join(REPO, 'dist/node-server.mjs')], { ...stack.env, SVCD_PORT: '0', SVCD_LOG_LEVEL: 'warn' });
    handlers = node.child;
    const nodeEntry = new Pool((JSON.parse(node.line) as { url: string }).url, { connections: CONCURRENCY });
    const bareStarted = await bareRuntime(root, modulePath);
    bare = bareStarted.child;
    const barePool = new Pool(`http://127.0.0.1:${bareStarted.port}`, { connections: CONCURRENCY });

    // Warm, concurrency 1: the service against the bare runtime, alternating.
    await load(service, path, auth, 1500, 1);
    await load(nodeEntry, path, auth, 500, 1);
    await load(barePool, '/', {}, 500, 1);
    const warm = { service: [] as number[], bare: [] as number[], session: [] as number[], node: [] as number[] };
    for (let i = 0; i < ROUNDS; i++) {
      warm.service.push(...(await load(service, path, auth, (SECONDS * 1000) / 2, 1)).latencies);
      warm.session.push(...(await load(service, path, { authorization: `Bearer ${token}` }, 500, 1)).latencies);
      warm.node.push(...(await load(nodeEntry, path, auth, 500, 1)).latencies);
      warm.bare.push(...(await load(barePool, '/', {}, (SECONDS * 1000) / 2, 1)).latencies);
    }

    // Warm throughput at concurrency 16, alternating.
    await load(service, path, auth, 2000, CONCURRENCY);
    await load(barePool, '/', {}, 1000, CONCURRENCY);
    const relayStarted = await startWithLine([process.execPath, '--input-type=module', '-e', bareRelaySource(bareStarted.port)], {});
    relay = relayStarted.child;
    const relayPool = new Pool(`http://127.0.0.1:${relayStarted.line.trim()}`, { connections: CONCURRENCY });
    await load(relayPool, '/', {}, 1000, CONCURRENCY);
    const through = { service: [] as number[], bare: [] as number[], relay: [] as number[], errors: 0, serviceErrors: 0 };
    const rssOverRounds = [runtimeRss(stack.agent.pid!).mib];
    for (let i = 0; i < ROUNDS; i++) {
      const s = await load(service, path, auth, SECONDS * 1000, CONCURRENCY);
      rssOverRounds.push(runtimeRss(stack.agent.pid!).mib);
      const b = await load(barePool, '/', {}, SECONDS * 1000, CONCURRENCY);
      const r = await load(relayPool, '/', {}, SECONDS * 1000, CONCURRENCY);
      through.service.push(s.rps);
      through.bare.push(b.rps);
      through.relay.push(r.rps);
      through.errors += s.errors + b.errors + r.errors;
      through.serviceErrors += s.errors;
    }
    // The runtime's peak resident memory under that load (information: its cgroup must leave room for it).
    const peakMiB = Math.max(...runtimePids(stack.agent.pid!).map((pid) => {
      try {
        return Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
      } catch {
        return 0;
      }
    }));
    // Memory over time (information): a soak when asked for, then the runtime after the load (the
    // agent runs no other runtime yet).
    const soaked = SOAK_SECONDS > 0 ? await soak(service, path, auth, SOAK_SECONDS, stack.agent.pid!) : null;
    const rssAtEnd = runtimeRss(stack.agent.pid!).mib;
    await relayPool.close();
    await stop(relay);
    relay = undefined;
    const bareRss = rssMiB(bare.pid!);
    await barePool.close();
    await nodeEntry.close();
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

    // A project's first invocation, its runtime started in the sandbox (information): a fresh project each run.
    const firstOfProject: number[] = [];
    for (let i = 0; i < 5; i++) {
      const fresh = await call('POST', '/v0/projects', token, '{"name":"fresh"}');
      const { key: freshKey } = await call('POST', `/v0/projects/${fresh.id}/keys`, token, '{}');
      await call('PUT', `/v0/projects/${fresh.id}/functions/hello`, token, MODULES.hello, 'application/javascript');
      const t0 = performance.now();
      const r = await service.request({ method: 'GET', path: `/v0/projects/${fresh.id}/functions/hello/invoke`, headers: { authorization: `Bearer ${freshKey}` } });
      if ((await r.body.text()) !== 'ok') throw new Error(`a fresh project's first invoke answered ${r.statusCode}`);
      firstOfProject.push(performance.now() - t0);
    }

    // Memory: a project of its own (so its runtime served no load test) with FUNCTIONS functions
    // deployed and warm (each invoked once), then idle; its runtime's processes, divided by FUNCTIONS,
    // beside what the first function alone cost.
    const idle = await call('POST', '/v0/projects', token, '{"name":"idle"}');
    const { key: idleKey } = await call('POST', `/v0/projects/${idle.id}/keys`, token, '{}');
    const before = new Set(runtimePids(stack.agent.pid!));
    let first = 0;
    let pids: number[] = [];
    for (let i = 0; i < FUNCTIONS; i++) {
      await call('PUT', `/v0/projects/${idle.id}/functions/f${i}`, token, MODULES.hello, 'application/javascript');
      const r = await service.request({ method: 'GET', path: `/v0/projects/${idle.id}/functions/f${i}/invoke`, headers: { authorization: `Bearer ${idleKey}` } });
      if ((await r.body.text()) !== 'ok') throw new Error(`f${i} answered ${r.statusCode}`);
      if (i === 0) {
        await sleep(300);
        pids = runtimePids(stack.agent.pid!).filter((pid) => !before.has(pid));
        first = pids.map(rssMiB).reduce((a, b) => a + b, 0);
      }
    }
    await sleep(500);
    const total = pids.map(rssMiB).filter((n) => !Number.isNaN(n)).reduce((a, b) => a + b, 0);
    const perFunction = total / FUNCTIONS;
    const marginal = (total - first) / (FUNCTIONS - 1);

    const added = p50(warm.service) - p50(warm.bare);
    const rate = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const throughput = rate(through.service) / rate(through.bare);
    const mark = (ok: boolean) => (ok ? 'ok' : 'MISSED');
    console.log(`functions: GET of a module answering "ok" through {base_url} (the local stack: the front hands a key's invocation to the host agent, runtimes in the OS sandbox) with a project key`);
    console.log(`warm p50, concurrency 1 ${p50(warm.service).toFixed(3)} ms through {base_url}; ${p50(warm.bare).toFixed(3)} ms the bare runtime (workerd, own process)`);
    console.log(`warm added p50          ${added.toFixed(3)} ms   (target <= 1 ms)   ${mark(added <= 1)}`);
    console.log(`warm p50 with a session ${p50(warm.session).toFixed(3)} ms (info: the front, the handlers in miniflare, one DynamoDB read judging the session)`);
    console.log(`warm p50, Node entry    ${p50(warm.node).toFixed(3)} ms (info: dist/node-server.mjs, the production Node workers' path, with the key)`);
    console.log(`throughput, c=${CONCURRENCY}        ${rate(through.service).toFixed(0)} req/s through {base_url}; ${rate(through.bare).toFixed(0)} req/s the bare runtime`);
    console.log(`throughput ratio        ${throughput.toFixed(3)}   (target >= 0.5)   ${mark(throughput >= 0.5)}   (${through.errors} errors, ${through.serviceErrors} of them through {base_url})`);
    console.log(`runtime peak RSS        ${peakMiB.toFixed(1)} MiB under that load (info: workerd's own buffers grow with the request rate; the runtime's memory limit leaves room for them)`);
    console.log(`runtime RSS over time   ${rssOverRounds.map((m) => m.toFixed(0)).join(' → ')} MiB before and after each throughput round; ${rssAtEnd.toFixed(0)} MiB after the load${soaked ? ' and the soak' : ''} (info: the runtime's processes; docs/functions.md "Memory over time")`);
    if (soaked) console.log(`soak, c=${SOAK_CONCURRENCY}, ${SOAK_SECONDS} s     runtime RSS (s MiB): ${soaked.samples.join(', ')}; ${soaked.rps.toFixed(0)} req/s, ${soaked.errors} errors; ${soaked.pids} runtime processes seen (a recycled runtime is replaced by a fresh one)`);
    console.log(`throughput ceiling      ${(rate(through.relay) / rate(through.bare)).toFixed(3)}   a bare Node relay (node:http + undici, nothing else) in front of the bare runtime: ${rate(through.relay).toFixed(0)} req/s; any design with one process between client and runtime stays below it on this machine`);
    console.log(`cold start p50          ${p50(cold.service).toFixed(1)} ms, first invocation of a new version   (target <= 50 ms)   ${mark(p50(cold.service) <= 50)}; bare runtime spawn to first answer ${p50(cold.bare).toFixed(1)} ms (${COLD_RUNS} runs each, alternating)`);
    console.log(`first invocation of a project ${p50(firstOfProject).toFixed(1)} ms p50 (info: its runtime started in the OS sandbox, ${firstOfProject.length} fresh projects)`);
    console.log(`memory per idle function ${perFunction.toFixed(1)} MiB   (target <= 10 MiB)   ${mark(perFunction <= 10)}   (${total.toFixed(1)} MiB in the ${pids.length} processes of one project's runtime for ${FUNCTIONS} warm idle functions; ${first.toFixed(1)} MiB with the first alone, ${marginal.toFixed(1)} MiB for each further one; the bare runtime with one module, after the load: ${bareRss.toFixed(1)} MiB)`);
    const [load1] = readFileSync('/proc/loadavg', 'utf8').split(' ') as [string];
    console.log(`machine: ${cpus().length} cores, load average ${load1} (other work on the machine colours the wall-clock figures)`);
    if (through.errors || soaked?.errors) process.exitCode = 1;
    await service.close();
  } finally {
    await stop(relay);
    await stop(bare);
    await stop(handlers);
    await stack?.stop();
    await dynamo.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
