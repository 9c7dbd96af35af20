/**
 * The public path (docs/performance.md): every figure measured through `{base_url}` of the local
 * stack exactly as `npm start` runs it (infra/local/start.ts spawned as its own process tree), by a
 * black-box client in this process, each beside a baseline measured in the same run:
 *
 *   1. `/v2` point reads: added p50 at concurrency 1 over the engine directly (target ≤ 0.4 ms) and
 *      throughput at concurrency 16 ÷ direct (target ≥ 0.6); the ceiling printed beside them: chains
 *      of bare TCP relays (1 and 2 hops), each relay a process of its own that copies bytes.
 *   2. Control plane: GET /v0/projects/{id} sequential p50 against 1 ms + one DynamoDB Local GetItem
 *      round trip measured beside it; the same figure for the production Node entry
 *      (dist/node-server.mjs over the same table and agent).
 *   3. Realtime: SUBSCRIBERS SSE subscribers of one channel, 1 KiB payloads, publishes with 8 in
 *      flight: deliveries/s (≥ 100,000), publish p50 (≤ 10 ms), delivery p99 (≤ 100 ms), and
 *      missing or duplicate deliveries (0). Subscribers and publisher run in a second process, so
 *      publish → receive is one clock and this process's CPU is not the receivers'.
 *   4. Storage: GET and PUT of 1 MiB and 32 MiB through `{base_url}` ÷ a bare node:http server in a
 *      process of its own streaming the same bytes from and to the same disk (PUT with fsync).
 *   5. Memory: peak RSS of the whole stack's process tree above idle during a 32 MiB upload (< 16 MiB),
 *      and the agent's alone (at the origin it relays the bytes).
 *
 *   node_modules/.bin/node test/bench/public.bench.ts [subscribers=1000] [sections=v2,control,transports,realtime,storage]
 *
 * `sections` (comma-separated) runs only some of them, to iterate on one path (`storage` includes
 * memory). SVC_BENCH_PROFILE=<dir> runs the stack's Node processes with `--cpu-prof` into <dir>
 * (written when the stack stops): the supervisor with the front, the host agent, the worker host.
 *
 * Build first (`npm run bench` does): the stack serves dist/worker.js and the Node entry is
 * dist/node-server.mjs. Baseline and service runs alternate, so drift on the shared machine hits both.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BatchGetCommand, GetCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { Agent as UndiciAgent, fetch as undiciFetch, Pool, request } from 'undici';
import { freePort } from '../../infra/local/dynamodb.ts';
import { descendantsOf } from '../../infra/local/processes.ts';
import { loadSettings } from '../../shared/config.ts';
import { createDb } from '../../shared/db/client.ts';
import { keys } from '../../shared/db/table.ts';

const REPO = resolve(import.meta.dirname, '../..');
const NODE = process.execPath;
const SUBSCRIBERS = Number(process.argv[2] ?? 1000);
const SECTIONS = new Set((process.argv[3] ?? 'v2,control,transports,realtime,storage').split(','));
const PROFILE = process.env.SVC_BENCH_PROFILE;
const ROWS = 1000;
const MiB = 1024 * 1024;

// ------------------------------------------------------------------------------------------ helpers

const quantile = (values: number[], q: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
};
const ms = (v: number) => `${v.toFixed(3)} ms`;
const verdict = (ok: boolean) => (ok ? 'ok' : 'MISSED');

/** A child process running `source` (CommonJS) that prints its port on its first line. */
async function startScript(source: string, env: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(NODE, ['-e', source], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout!.setEncoding('utf8').once('data', (d: string) => resolve(d.trim()));
    child.once('exit', (code) => reject(new Error(`helper process exited ${code}`)));
  });
  return { child, url: `http://127.0.0.1:${port}` };
}

/** A bare TCP relay to `target` (no parsing, no authentication): one hop of the ceiling. */
function startRelay(target: URL): Promise<{ child: ChildProcess; url: string }> {
  return startScript(`
    const net = require('node:net');
    const server = net.createServer((c) => {
      c.setNoDelay(true);
      const u = net.connect(${Number(target.port)}, ${JSON.stringify(target.hostname)});
      u.setNoDelay(true);
      c.pipe(u); u.pipe(c);
      c.on('error', () => u.destroy()); u.on('error', () => c.destroy());
    });
    server.listen(0, '127.0.0.1', () => console.log(server.address().port));`);
}

/** The storage baseline: a bare node:http server streaming bytes from and to files in `dir`. */
function startBareFileServer(dir: string): Promise<{ child: ChildProcess; url: string }> {
  return startScript(`
    const http = require('node:http'); const fs = require('node:fs'); const path = require('node:path');
    const dir = ${JSON.stringify(dir)};
    http.createServer((req, res) => {
      const file = path.join(dir, path.basename(req.url));
      if (req.method === 'PUT') {
        const out = fs.createWriteStream(file);
        req.pipe(out);
        out.on('finish', () => fs.fsync(out.fd ?? -1, () => fs.close(out.fd, () => { res.writeHead(201); res.end(); })));
        out.on('error', () => { res.writeHead(500); res.end(); });
        // createWriteStream closes on finish unless told otherwise: keep the fd for the fsync.
        out.autoClose = false;
      } else {
        const size = fs.statSync(file).size;
        res.writeHead(200, { 'content-length': size });
        fs.createReadStream(file).pipe(res);
      }
    }).listen(0, '127.0.0.1', function () { console.log(this.address().port); });`);
}

/** The resident set of `pid` in bytes (0 once it is gone). */
function processRss(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0; // gone between the listing and the read
  }
}

/** Sum of the resident set of `pid` and every descendant, in bytes. */
function treeRss(pid: number): number {
  let total = 0;
  for (const p of [pid, ...descendantsOf(pid)]) total += processRss(p);
  return total;
}

/** The local stack as `npm start` runs it, in a directory of its own. */
async function startStack(dir: string): Promise<{ child: ChildProcess; url: string; dynamoPort: number; dataplaneUrl: string }> {
  const port = await freePort();
  const dynamoPort = await freePort();
  const child = spawn(NODE, [join(REPO, 'infra/local/start.ts'), '--dir', dir, '--dynamodb-port', String(dynamoPort)], {
    cwd: REPO,
    env: {
      PATH: process.env.PATH!,
      HOME: process.env.HOME ?? '/tmp',
      SVCD_PORT: String(port),
      SVCD_AGENT_PORT: '0',
      SVCD_DATAPLANE_PORT: '0',
      ...(PROFILE ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${resolve(PROFILE)}` } : {}),
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d.length > 0 && out.length < 65536 ? d : ''));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (out += out.length < 65536 ? d : ''));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const m = /svc-cloud ready at (\S+)/.exec(out);
      if (m) resolve(m[1]!);
      if (m || child.exitCode !== null) clearInterval(timer);
      if (child.exitCode !== null) reject(new Error(`stack exited ${child.exitCode}: ${out}`));
    }, 50);
  });
  // The agent's own /v2 listener, from the stack's line about it, which may follow the banner by a
  // moment (an arm of its own: what the origin costs beside it).
  for (let i = 0; i < 100 && !/\/v2 at http/.test(out); i++) await new Promise((r) => setTimeout(r, 50));
  const dataplaneUrl = /\/v2 at (http:\/\/[^,)\s]+)/.exec(out)?.[1];
  if (!dataplaneUrl) {
    child.kill('SIGTERM');
    throw new Error(`no /v2 listener in the stack's output: ${out}`);
  }
  return { child, url, dynamoPort, dataplaneUrl };
}

// ---------------------------------------------------------------------------------------- data plane

interface Round {
  latencies: number[];
  seconds: number;
  errors: number;
}

async function pointReads(pool: Pool, headers: Record<string, string>, durationMs: number, concurrency: number): Promise<Round> {
  const latencies: number[] = [];
  let errors = 0;
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        const r = await pool.request({
          method: 'POST',
          path: '/v2/sql',
          headers,
          body: `{"sql":"SELECT id, v FROM t WHERE id = ?","params":[${1 + Math.floor(Math.random() * ROWS)}]}`,
        });
        const body = await r.body.arrayBuffer();
        if (r.statusCode !== 200 || body.byteLength < 12) errors++;
        latencies.push(performance.now() - t0);
      }
    }),
  );
  return { latencies, seconds: (performance.now() - start) / 1000, errors };
}

async function dataPlane(base: string, key: string, engine: URL, listener: string, stackPid: number): Promise<void> {
  const headers = { 'x-svc-protocol-minor': '3', 'content-type': 'application/json' };
  const keyed = { ...headers, authorization: `Bearer ${key}` };
  const relay1 = await startRelay(engine);
  const relay2a = await startRelay(engine);
  const relay2 = await startRelay(new URL(relay2a.url));
  const arms = [
    { name: 'engine direct', pool: new Pool(engine.origin, { connections: 16 }), headers },
    { name: `through {base_url}`, pool: new Pool(base, { connections: 16 }), headers: keyed },
    { name: 'bare relay, 1 hop', pool: new Pool(relay1.url, { connections: 16 }), headers },
    { name: 'bare relays, 2 hops', pool: new Pool(relay2.url, { connections: 16 }), headers },
    { name: "agent's /v2 listener", pool: new Pool(listener, { connections: 16 }), headers: keyed },
  ];
  // CPU (user + system) of the agent behind {base_url} and of the one-hop relay, over their concurrency-16 rounds.
  const cpuOf: Record<number, number> = { 1: agentPid(stackPid), 2: relay1.child.pid! };
  const cpu: Record<number, number> = { 1: 0, 2: 0 };
  try {
    for (const a of arms) await pointReads(a.pool, a.headers, 1000, 16);
    const c1 = arms.map(() => [] as Round[]);
    const c16 = arms.map(() => [] as Round[]);
    for (let round = 0; round < 3; round++) {
      for (const [i, a] of arms.entries()) c1[i]!.push(await pointReads(a.pool, a.headers, 1500, 1));
      for (const [i, a] of arms.entries()) {
        const before = cpuOf[i] ? cpuMs(cpuOf[i]!) : 0;
        c16[i]!.push(await pointReads(a.pool, a.headers, 3000, 16));
        if (cpuOf[i]) cpu[i]! += cpuMs(cpuOf[i]!) - before;
      }
    }
    const p50 = (rounds: Round[]) => quantile(rounds.flatMap((r) => r.latencies), 0.5);
    const rps = (rounds: Round[]) => rounds.reduce((s, r) => s + r.latencies.length, 0) / rounds.reduce((s, r) => s + r.seconds, 0);
    const errors = [...c1, ...c16].flat().reduce((s, r) => s + r.errors, 0);
    console.log('\n1. /v2 point reads (POST /v2/sql, 1,000-row table)');
    for (const [i, a] of arms.entries()) {
      console.log(`   ${a.name.padEnd(22)} concurrency 1: p50 ${ms(p50(c1[i]!))}   concurrency 16: ${rps(c16[i]!).toFixed(0).padStart(6)} req/s`);
    }
    const added = p50(c1[1]!) - p50(c1[0]!);
    const ratio = rps(c16[1]!) / rps(c16[0]!);
    console.log(`   added p50, concurrency 1      ${ms(added)}   (target <= 0.4 ms)   ${verdict(added <= 0.4)}`);
    console.log(`   throughput ratio, conc. 16    ${ratio.toFixed(3)}   (target >= 0.6)   ${verdict(ratio >= 0.6)}`);
    for (const [i, hops] of [[2, 1], [3, 2]] as const) {
      console.log(`   ceiling, ${hops} bare relay hop${hops > 1 ? 's' : ' '}      added p50 ${ms(p50(c1[i]!) - p50(c1[0]!))}, ratio ${(rps(c16[i]!) / rps(c16[0]!)).toFixed(3)}`);
    }
    const count = (i: number) => c16[i]!.reduce((n, r) => n + r.latencies.length, 0);
    console.log(`   CPU per request (conc. 16)    agent ${((cpu[1]! * 1000) / count(1)).toFixed(0)} µs, bare relay ${((cpu[2]! * 1000) / count(2)).toFixed(0)} µs`);
    if (errors) console.log(`   !!! ${errors} requests failed`);
  } finally {
    for (const a of arms) await a.pool.close();
    for (const r of [relay1, relay2a, relay2]) r.child.kill();
  }
}

// ------------------------------------------------------------------------------------- control plane

async function sequentialGets(url: string, token: string, n: number): Promise<number[]> {
  const pool = new Pool(new URL(url).origin, { connections: 1 });
  const latencies: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const r = await pool.request({ method: 'GET', path: new URL(url).pathname, headers: { authorization: `Bearer ${token}` } });
      await r.body.arrayBuffer();
      if (r.statusCode !== 200) throw new Error(`GET ${url}: ${r.statusCode}`);
      latencies.push(performance.now() - t0);
    }
  } finally {
    await pool.close();
  }
  return latencies;
}

/**
 * The floor of the miniflare line (docs/performance.md "Control plane"): a worker in workerd that
 * answers every request with one GetItem of the project item to the same DynamoDB Local (unsigned:
 * DynamoDB Local does not check signatures) and nothing else. Measured directly, without the front.
 */
async function workerdFloor(endpoint: string, table: string, projectId: string, n: number): Promise<number[]> {
  const { Miniflare } = await import('miniflare');
  const body = JSON.stringify({ TableName: table, Key: { pk: { S: keys.project(projectId).pk }, sk: { S: keys.project(projectId).sk } }, ConsistentRead: true });
  const script = `export default { async fetch(request, env) {
    const r = await fetch(env.DDB, { method: 'POST', body: env.BODY, headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': 'DynamoDB_20120810.GetItem', authorization: 'AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0' } });
    return new Response(await r.text(), { headers: { 'content-type': 'application/json' } });
  } }`;
  const mf = new Miniflare({ modules: true, script, bindings: { DDB: endpoint, BODY: body }, compatibilityDate: '2025-09-01', host: '127.0.0.1', port: 0 });
  try {
    const url = (await mf.ready).toString().replace(/\/$/, '');
    await sequentialGets(`${url}/floor`, 'x', 100);
    return await sequentialGets(`${url}/floor`, 'x', n);
  } finally {
    await mf.dispose();
  }
}

async function controlPlane(base: string, token: string, projectId: string, dir: string, dynamoPort: number): Promise<void> {
  const secrets = JSON.parse(readFileSync(join(dir, 'secrets.json'), 'utf8')) as Record<string, string>;
  const endpoint = `http://127.0.0.1:${dynamoPort}`;
  const settings = loadSettings({ ...secrets, SVCD_DYNAMODB_ENDPOINT: endpoint });
  // The same client and read the handlers make: the project item, strongly consistent.
  const db = createDb({ ...settings, SVCD_AWS_ACCESS_KEY_ID: 'local', SVCD_AWS_SECRET_ACCESS_KEY: 'local' });
  const getItem = async () => {
    const t0 = performance.now();
    const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: keys.project(projectId), ConsistentRead: true }));
    if (!out.Item) throw new Error('GetItem found no project item');
    return performance.now() - t0;
  };
  const nodePort = await freePort();
  const node = spawn(NODE, [join(REPO, 'dist/node-server.mjs')], {
    env: {
      PATH: process.env.PATH!,
      ...secrets,
      SVCD_DYNAMODB_ENDPOINT: endpoint,
      SVCD_AWS_ACCESS_KEY_ID: 'local',
      SVCD_AWS_SECRET_ACCESS_KEY: 'local',
      SVCD_PORT: String(nodePort),
      SVCD_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    const nodeBase = `http://127.0.0.1:${nodePort}`;
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`${nodeBase}/v0/health`)).status < 500) break;
      } catch {
        if (i > 200) throw new Error('the Node entry did not start');
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const path = `/v0/projects/${projectId}`;
    await sequentialGets(base + path, token, 100);
    await sequentialGets(nodeBase + path, token, 100);
    for (let i = 0; i < 100; i++) await getItem();
    const stack: number[] = [];
    const entry: number[] = [];
    const item: number[] = [];
    for (let round = 0; round < 5; round++) {
      stack.push(...(await sequentialGets(base + path, token, 200)));
      entry.push(...(await sequentialGets(nodeBase + path, token, 200)));
      for (let i = 0; i < 200; i++) item.push(await getItem());
    }
    const floor = await workerdFloor(endpoint, settings.SVCD_TABLE, projectId, 1000);
    const budget = 1 + quantile(item, 0.5);
    console.log('\n2. Control plane: GET /v0/projects/{id}, sequential, one keep-alive connection');
    console.log(`   DynamoDB Local GetItem        p50 ${ms(quantile(item, 0.5))}   → budget 1 ms + GetItem = ${ms(budget)}`);
    console.log(`   through {base_url} (miniflare) p50 ${ms(quantile(stack, 0.5))}  p99 ${ms(quantile(stack, 0.99))}   ${verdict(quantile(stack, 0.5) <= budget)}`);
    console.log(`   dist/node-server.mjs          p50 ${ms(quantile(entry, 0.5))}  p99 ${ms(quantile(entry, 0.99))}   ${verdict(quantile(entry, 0.5) <= budget)}`);
    console.log(`   ceiling: workerd doing one GetItem per request and nothing else, no front: p50 ${ms(quantile(floor, 0.5))} (${ms(quantile(floor, 0.5) - quantile(item, 0.5))} over GetItem)`);
  } finally {
    node.kill('SIGTERM');
    db.doc.destroy();
  }
}

/**
 * `/v0` through {base_url} with the two clients users have: Node's `fetch` (undici, the SDK's and the
 * CLI's transport) and `node:http` (an Agent with keep-alive), each on one reused connection,
 * sequential; their p50s must differ by less than 1 ms (docs/performance.md "The public path": a
 * small-write / delayed-ACK interaction once made fetch wait ~48 ms per request).
 */
async function clientTransports(base: string, token: string, projectId: string): Promise<void> {
  const { Agent: HttpAgent, request: httpRequest } = await import('node:http');
  const auth = { authorization: `Bearer ${token}` };
  const publishBody = JSON.stringify({ channel: 'transports', event: 'tick', payload: { n: 1 } });
  const json = { ...auth, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(publishBody)) };
  const cases = [
    { name: 'POST .../realtime/publish', method: 'POST', path: `/v0/projects/${projectId}/realtime/publish`, headers: json, body: publishBody, ok: [200] },
    { name: 'GET /v0/health', method: 'GET', path: '/v0/health', headers: {}, body: undefined, ok: [200, 503] },
    { name: 'GET /v0/projects/{id}', method: 'GET', path: `/v0/projects/${projectId}`, headers: auth, body: undefined, ok: [200] },
  ];
  type Case = (typeof cases)[number];
  // Each client keeps one connection for everything, as the SDK and the CLI do; its first request
  // is a publish, as an application's first call may well be.
  const dispatcher = new UndiciAgent({ connections: 1 });
  const agent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
  const viaFetch = async (c: Case) => {
    const t0 = performance.now();
    const r = await undiciFetch(base + c.path, { method: c.method, headers: c.headers, body: c.body, dispatcher });
    await r.arrayBuffer();
    if (!c.ok.includes(r.status)) throw new Error(`fetch ${c.name}: ${r.status}`);
    return performance.now() - t0;
  };
  const viaHttp = (c: Case) =>
    new Promise<number>((resolve, reject) => {
      const t0 = performance.now();
      const req = httpRequest(base + c.path, { method: c.method, headers: c.headers, agent }, (res) => {
        res.resume();
        res.on('end', () => (c.ok.includes(res.statusCode!) ? resolve(performance.now() - t0) : reject(new Error(`node:http ${c.name}: ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end(c.body);
    });
  try {
    console.log('\n2b. /v0 by client transport through {base_url}: fetch (undici) and node:http, one reused connection each (first request a publish), sequential p50 (target: differ by < 1 ms)');
    const f = cases.map(() => [] as number[]);
    const h = cases.map(() => [] as number[]);
    for (let round = 0; round < 5; round++) {
      for (const [i, c] of cases.entries()) {
        for (let n = 0; n < 40; n++) {
          const a = await viaFetch(c);
          const b = await viaHttp(c);
          if (round > 0) (f[i]!.push(a), h[i]!.push(b));
        }
      }
    }
    for (const [i, c] of cases.entries()) {
      const diff = Math.abs(quantile(f[i]!, 0.5) - quantile(h[i]!, 0.5));
      console.log(`   ${c.name.padEnd(28)} fetch p50 ${ms(quantile(f[i]!, 0.5))}   node:http p50 ${ms(quantile(h[i]!, 0.5))}   differ ${ms(diff)}   ${verdict(diff < 1)}`);
    }
  } finally {
    agent.destroy();
    await dispatcher.close();
  }
}

// ------------------------------------------------------------------------------------------ realtime

interface RealtimeConfig {
  subscribeUrl: string;
  publishUrl: string;
  token: string | null;
  subscribers: number;
  inFlight: number;
  /** Run one after another on the same subscribers: `rate` events/s at most (0: as fast as they are answered). */
  phases: { publishes: number; rate: number }[];
}

/** What one phase of the realtime client measured. */
interface RealtimeResult {
  deliveries: number;
  expected: number;
  missing: number;
  duplicates: number;
  perSecond: number;
  publishP50: number;
  deliveryP50: number;
  deliveryP99: number;
}

/** Where a delivered event's number is written in its frame: the payload is `{"n":<n>,"filler":…}`. */
const N_MARK = Buffer.from('"payload":{"n":');

/**
 * The realtime client process: subscribers and publisher, one clock. Prints one JSON line per
 * phase. Each subscriber is a raw socket reading into one shared buffer and scanning frames for the
 * event's number (no HTTP client, no JSON parse per delivery), so the client costs as little as it
 * can and the figure is the service's.
 */
async function realtimeClient(config: RealtimeConfig): Promise<void> {
  const target = new URL(config.subscribeUrl);
  const readBuffer = Buffer.alloc(256 * 1024);
  const total = config.phases.reduce((n, p) => n + p.publishes, 0);
  const seen = Array.from({ length: config.subscribers }, () => new Uint8Array(total));
  const latencies = config.phases.map((p) => new Float64Array(p.publishes * config.subscribers));
  const phaseOf = new Uint8Array(total);
  const counts = config.phases.map(() => ({ deliveries: 0, duplicates: 0, last: 0 }));
  const sentAt = new Float64Array(total);
  const open = (s: number) =>
    new Promise<void>((ok, fail) => {
      const mine = seen[s]!;
      let rest: Buffer | null = null;
      let opened = false;
      const onData = (chunk: Buffer) => {
        const now = performance.now();
        let b = rest ? Buffer.concat([rest, chunk]) : chunk;
        if (!opened) {
          const head = b.indexOf('\r\n\r\n');
          if (head < 0) return void (rest = Buffer.from(b));
          if (b.toString('latin1', 0, 12) !== 'HTTP/1.1 200') return fail(new Error(`subscribe answered ${b.toString('latin1', 0, head)}`));
          opened = true;
          ok();
          b = b.subarray(head + 4);
        }
        // Only whole frames: the rest waits for the next read.
        const end = b.lastIndexOf('\n\n');
        if (end < 0) return void (rest = Buffer.from(b));
        for (let at = b.indexOf(N_MARK); at >= 0 && at < end; at = b.indexOf(N_MARK, at + N_MARK.length)) {
          let n = 0;
          for (let i = at + N_MARK.length, c = b[i]!; c >= 48 && c <= 57; c = b[++i]!) n = n * 10 + (c - 48);
          const phase = phaseOf[n]!;
          const count = counts[phase]!;
          if (mine[n]) count.duplicates++;
          mine[n] = 1;
          latencies[phase]![count.deliveries++] = now - sentAt[n]!;
          count.last = now;
        }
        rest = end + 2 < b.length ? Buffer.from(b.subarray(end + 2)) : null;
      };
      const socket = connect({
        port: Number(target.port),
        host: target.hostname,
        onread: { buffer: readBuffer, callback: (n: number, buf: Uint8Array) => (onData(buf.subarray(0, n) as Buffer), true) },
      });
      socket.on('error', fail);
      socket.write(
        `GET ${target.pathname}${target.search} HTTP/1.1\r\nhost: ${target.host}\r\naccept: text/event-stream\r\n` +
          `${config.token ? `authorization: Bearer ${config.token}\r\n` : ''}\r\n`,
      );
    });
  for (let s = 0; s < config.subscribers; s += 100) await Promise.all(Array.from({ length: Math.min(100, config.subscribers - s) }, (_, i) => open(s + i)));
  await new Promise((r) => setTimeout(r, 300));
  const publisher = new Pool(new URL(config.publishUrl).origin, { connections: config.inFlight });
  const filler = 'x'.repeat(1024 - 40);
  let first = 0;
  for (const [index, phase] of config.phases.entries()) {
    phaseOf.fill(index, first, first + phase.publishes);
    const publishLatencies: number[] = [];
    let next = first;
    const last = first + phase.publishes;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: config.inFlight }, async () => {
        while (next < last) {
          const n = next++;
          // Paced: the n-th event of the phase is not sent before its time.
          const due = phase.rate ? start + ((n - first) * 1000) / phase.rate : 0;
          if (due > performance.now()) await new Promise((r) => setTimeout(r, due - performance.now()));
          const body = JSON.stringify({ channel: 'bench', event: 'tick', payload: { n, filler } });
          const t0 = performance.now();
          sentAt[n] = t0;
          const r = await publisher.request({
            method: 'POST',
            path: new URL(config.publishUrl).pathname,
            headers: { ...(config.token ? { authorization: `Bearer ${config.token}` } : {}), 'content-type': 'application/json' },
            body,
          });
          await r.body.arrayBuffer();
          if (r.statusCode !== 200) throw new Error(`publish answered ${r.statusCode}`);
          publishLatencies.push(performance.now() - t0);
        }
      }),
    );
    const count = counts[index]!;
    const expected = phase.publishes * config.subscribers;
    const deadline = performance.now() + 15_000;
    while (count.deliveries < expected && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const delivered = Array.from(latencies[index]!.subarray(0, count.deliveries));
    const result: RealtimeResult = {
      deliveries: count.deliveries,
      expected,
      missing: expected - count.deliveries + count.duplicates,
      duplicates: count.duplicates,
      perSecond: count.deliveries / ((count.last - start) / 1000),
      publishP50: quantile(publishLatencies, 0.5),
      deliveryP50: quantile(delivered, 0.5),
      deliveryP99: quantile(delivered, 0.99),
    };
    console.log(JSON.stringify(result));
    first = last;
    await new Promise((r) => setTimeout(r, 300));
  }
  const cpu = process.cpuUsage();
  console.log(JSON.stringify({ clientCpuMs: (cpu.user + cpu.system) / 1000 }));
  process.exit(0);
}

/** CPU time (user + system) `pid` has used so far, in ms (Linux /proc; 0 elsewhere). */
function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return 0;
  }
}

/** The host agent's process among the stack's. */
function agentPid(stackPid: number): number {
  const pid = descendantsOf(stackPid).find((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('host-agent/main.ts');
    } catch {
      return false;
    }
  });
  if (pid === undefined) throw new Error('no host agent process below the stack');
  return pid;
}

/** Runs the realtime client in a process of its own and answers what it measured, phase by phase. */
async function runRealtimeClient(config: RealtimeConfig, serverPid: number): Promise<{ phases: RealtimeResult[]; serverCpuMs: number; clientCpuMs: number }> {
  const serverBefore = cpuMs(serverPid);
  const profile = PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${resolve(PROFILE)}`] : [];
  const child = spawn(NODE, [...profile, import.meta.filename, '--realtime-client'], { stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdin!.end(JSON.stringify(config));
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  if (code !== 0) throw new Error(`realtime client exited ${code}: ${out}`);
  const lines = out.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  const { clientCpuMs } = lines.pop() as { clientCpuMs: number };
  return { phases: lines as RealtimeResult[], serverCpuMs: cpuMs(serverPid) - serverBefore, clientCpuMs };
}

/**
 * The ceiling: a bare node:http fanout in a process of its own (no authentication, no hub, no
 * queues), writing each published event to every open stream as one chunk.
 */
function startBareFanout(): Promise<{ child: ChildProcess; url: string }> {
  return startScript(`
    const http = require('node:http');
    const subs = new Set();
    let seq = 0;
    http.createServer((req, res) => {
      if (req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(': subscribed\\n\\n');
        subs.add(res);
        res.on('close', () => subs.delete(res));
        return;
      }
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        const json = JSON.stringify({ id: ++seq, channel: body.channel, event: body.event, payload: body.payload, ts: new Date().toISOString() });
        const frame = Buffer.from('id: ' + seq + '\\nevent: ' + body.event + '\\ndata: ' + json + '\\n\\n');
        for (const s of subs) s.write(frame);
        res.writeHead(200, { 'content-type': 'application/json' }).end(json);
      });
    }).listen(0, '127.0.0.1', function () { console.log(this.address().port); });`);
}

/** The events/s of the paced phase: above 100 (100,000 deliveries/s with 1,000 subscribers), so keeping up passes. */
const REALTIME_RATE = 125;

async function realtime(base: string, token: string, projectId: string, stackPid: number): Promise<void> {
  const shape = { subscribers: SUBSCRIBERS, inFlight: 8, phases: [{ publishes: 400, rate: REALTIME_RATE }, { publishes: 400, rate: 0 }] };
  const service = await runRealtimeClient(
    { subscribeUrl: `${base}/v0/projects/${projectId}/realtime/subscribe?channel=bench`, publishUrl: `${base}/v0/projects/${projectId}/realtime/publish`, token, ...shape },
    agentPid(stackPid),
  );
  const [paced, max] = service.phases;
  const bare = await startBareFanout();
  let baseline: Awaited<ReturnType<typeof runRealtimeClient>>;
  try {
    baseline = await runRealtimeClient({ subscribeUrl: `${bare.url}/sub?channel=bench`, publishUrl: `${bare.url}/pub`, token: null, ...shape }, bare.child.pid!);
  } finally {
    bare.child.kill();
  }
  const ceiling = baseline.phases;
  const perDelivery = (run: typeof service) => {
    const deliveries = run.phases.reduce((n, r) => n + r.deliveries, 0);
    return `server ${((run.serverCpuMs * 1000) / deliveries).toFixed(1)} µs, client ${((run.clientCpuMs * 1000) / deliveries).toFixed(1)} µs`;
  };
  const line = (r: RealtimeResult) =>
    `${r.perSecond.toFixed(0).padStart(7)} deliveries/s   publish p50 ${ms(r.publishP50)}   delivery p50 ${ms(r.deliveryP50)} p99 ${ms(r.deliveryP99)}`;
  console.log(`\n3. Realtime: ${SUBSCRIBERS} SSE subscribers through {base_url}, 400 publishes of 1 KiB per phase, at most ${shape.inFlight} in flight`);
  console.log(`   paced at ${REALTIME_RATE} events/s   ${line(paced!)}`);
  console.log(`   as fast as answered  ${line(max!)}`);
  const delivered = paced!.perSecond;
  console.log(`   deliveries/s       ${delivered.toFixed(0)} paced, ${max!.perSecond.toFixed(0)} at most   (target >= 100,000)   ${verdict(Math.max(delivered, max!.perSecond) >= 100_000)}`);
  console.log(`   publish p50        ${ms(paced!.publishP50)} paced   (target <= 10 ms)   ${verdict(paced!.publishP50 <= 10)}`);
  console.log(`   delivery p99       ${ms(paced!.deliveryP99)} paced   (target <= 100 ms)   ${verdict(paced!.deliveryP99 <= 100)}`);
  const missing = paced!.missing + max!.missing;
  const duplicates = paced!.duplicates + max!.duplicates;
  console.log(`   delivered ${paced!.deliveries + max!.deliveries} of ${paced!.expected + max!.expected}; missing ${missing}, duplicates ${duplicates}   ${verdict(missing === 0 && duplicates === 0)}`);
  console.log(`   as fast as answered, publish p50 is ${shape.inFlight} in flight / events per second (Little's law), not the publish path's own time`);
  console.log(`   baseline, bare node:http fanout (own process, same client): paced ${line(ceiling[0]!)}`);
  console.log(`                                                              fastest ${line(ceiling[1]!)}`);
  console.log(`   CPU per delivery (user + system, both phases): service ${perDelivery(service)}; bare fanout ${perDelivery(baseline)}`);
}

// ------------------------------------------------------------------------------------------- storage

async function timed(url: string, method: 'GET' | 'PUT', headers: Record<string, string>, body?: Buffer): Promise<{ ms: number; digest: string }> {
  const t0 = performance.now();
  const r = await request(url, { method, headers, body });
  const hash = createHash('sha256');
  for await (const chunk of r.body) hash.update(chunk as Buffer);
  if (r.statusCode >= 300) throw new Error(`${method} ${url}: ${r.statusCode}`);
  return { ms: performance.now() - t0, digest: hash.digest('hex') };
}

/**
 * What the catalog costs a PUT and a GET at the least, in DynamoDB Local as the stack runs it
 * (persisted): p50 of the read a GET makes first (a strongly consistent BatchGetItem of the
 * session's two items and the project, bucket and row) and of the flip a PUT commits (a
 * TransactWriteItems of a conditional row Put and a receipt Put), on scratch items of the stack's
 * table.
 */
async function catalogFloor(dir: string, dynamoPort: number): Promise<{ read: number; flip: number }> {
  const secrets = JSON.parse(readFileSync(join(dir, 'secrets.json'), 'utf8')) as Record<string, string>;
  const settings = loadSettings({ ...secrets, SVCD_DYNAMODB_ENDPOINT: `http://127.0.0.1:${dynamoPort}` });
  const db = createDb({ ...settings, SVCD_AWS_ACCESS_KEY_ID: 'local', SVCD_AWS_SECRET_ACCESS_KEY: 'local' });
  const pk = `BENCH#${randomBytes(6).toString('hex')}`;
  const read: number[] = [];
  const flip: number[] = [];
  try {
    for (let i = 0; i < 160; i++) {
      let t0 = performance.now();
      await db.doc.send(new BatchGetCommand({ RequestItems: { [db.table]: { Keys: ['A', 'S', 'P', 'B', 'O'].map((sk) => ({ pk, sk })), ConsistentRead: true } } }));
      if (i >= 30) read.push(performance.now() - t0);
      t0 = performance.now();
      await db.doc.send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { TableName: db.table, Item: { pk, sk: 'O', n: i + 1, blob: randomBytes(32).toString('hex') }, ConditionExpression: i === 0 ? 'attribute_not_exists(pk)' : 'n = :n', ...(i === 0 ? {} : { ExpressionAttributeValues: { ':n': i } }) } },
            { Put: { TableName: db.table, Item: { pk, sk: `RCPT#${i}`, op: 'object.put', at: new Date().toISOString() }, ConditionExpression: 'attribute_not_exists(pk)' } },
          ],
        }),
      );
      if (i >= 30) flip.push(performance.now() - t0);
    }
  } finally {
    db.doc.destroy();
  }
  return { read: quantile(read, 0.5), flip: quantile(flip, 0.5) };
}

async function storage(base: string, token: string, projectId: string, stackPid: number, scratch: string, dir: string, dynamoPort: number): Promise<void> {
  const auth = { authorization: `Bearer ${token}` };
  const b = await fetch(`${base}/v0/projects/${projectId}/storage/buckets/bench`, { method: 'PUT', headers: auth });
  if (b.status >= 300) throw new Error(`bucket: ${b.status}`);
  // The agent alone too: at the origin it relays the objects' bytes to the handlers.
  const agent = agentPid(stackPid);
  const agentBefore = processRss(agent);
  const bare = await startBareFileServer(scratch);
  // The hops the bytes cross besides the store's own server (the front and workerd), as bare TCP relays.
  const relayA = await startRelay(new URL(bare.url));
  const relayed = await startRelay(new URL(relayA.url));
  try {
    const catalog = await catalogFloor(dir, dynamoPort);
    console.log('\n4. Storage through {base_url} against a bare node:http server in its own process (same disk, PUT with fsync)');
    console.log(`   DynamoDB Local (persisted, as npm start runs it): the read a GET or PUT starts with p50 ${ms(catalog.read)}, a PUT's flip with its receipt p50 ${ms(catalog.flip)}`);
    for (const size of [1 * MiB, 32 * MiB]) {
      const bytes = randomBytes(size);
      const object = `${base}/v0/projects/${projectId}/storage/objects/bench/o-${size}`;
      const put = { ...auth, 'content-type': 'application/octet-stream' };
      const rounds = size > MiB ? 4 : 12;
      const best = { servicePut: Infinity, bare_put: Infinity, serviceGet: Infinity, bareGet: Infinity, relayPut: Infinity, relayGet: Infinity };
      for (let i = 0; i < rounds; i++) {
        best.bare_put = Math.min(best.bare_put, (await timed(`${bare.url}/o-${size}`, 'PUT', {}, bytes)).ms);
        best.servicePut = Math.min(best.servicePut, (await timed(object, 'PUT', put, bytes)).ms);
        best.relayPut = Math.min(best.relayPut, (await timed(`${relayed.url}/r-${size}`, 'PUT', {}, bytes)).ms);
        best.bareGet = Math.min(best.bareGet, (await timed(`${bare.url}/o-${size}`, 'GET', {})).ms);
        const got = await timed(object, 'GET', auth);
        if (got.digest !== createHash('sha256').update(bytes).digest('hex')) throw new Error('GET answered other bytes');
        best.serviceGet = Math.min(best.serviceGet, got.ms);
        best.relayGet = Math.min(best.relayGet, (await timed(`${relayed.url}/r-${size}`, 'GET', {})).ms);
      }
      const label = `${size / MiB} MiB`;
      const mibs = (t: number) => `${(size / MiB / (t / 1000)).toFixed(1).padStart(7)} MiB/s`;
      for (const [op, svc, raw, hops, db] of [
        ['PUT', best.servicePut, best.bare_put, best.relayPut, catalog.flip],
        ['GET', best.serviceGet, best.bareGet, best.relayGet, catalog.read],
      ] as const) {
        const ratio = raw / svc;
        console.log(`   ${op} ${label.padEnd(7)} service ${ms(svc).padStart(11)} ${mibs(svc)}   bare ${ms(raw).padStart(11)} ${mibs(raw)}   ratio ${ratio.toFixed(3)} (target >= 0.5)   ${verdict(ratio >= 0.5)}`);
        // The floor of the service: the bytes through two bare relays, plus the catalog call the
        // request cannot do without (the read before a GET's bytes, the flip after a PUT's).
        console.log(`       ceiling: bare behind 2 bare relays ${ms(hops)} + ${op === 'PUT' ? 'flip' : 'read'} ${ms(db)} = ${ms(hops + db)}: ratio at most ${(raw / (hops + db)).toFixed(3)}`);
      }
    }

    // 5. Memory: the whole stack's tree, idle, then sampled every 5 ms during a 32 MiB upload.
    const bytes = randomBytes(32 * MiB);
    await new Promise((r) => setTimeout(r, 1000));
    const idle = Math.min(treeRss(stackPid), treeRss(stackPid), treeRss(stackPid));
    const agentIdle = processRss(agent);
    let peak = 0;
    let agentPeak = 0;
    const sampler = setInterval(() => {
      peak = Math.max(peak, treeRss(stackPid));
      agentPeak = Math.max(agentPeak, processRss(agent));
    }, 5);
    await timed(`${base}/v0/projects/${projectId}/storage/objects/bench/memory`, 'PUT', { ...auth, 'content-type': 'application/octet-stream' }, bytes);
    clearInterval(sampler);
    const above = (peak - idle) / MiB;
    console.log('\n5. Memory: the whole stack (supervisor, front, DynamoDB Local, agent, engine, miniflare/workerd)');
    console.log(`   idle ${(idle / MiB).toFixed(1)} MiB, peak during a 32 MiB upload ${(peak / MiB).toFixed(1)} MiB: ${above.toFixed(1)} MiB above idle (target < 16 MiB)   ${verdict(above < 16)}`);
    console.log(`   the agent alone (origin and blob store): ${(agentBefore / MiB).toFixed(1)} MiB before this section, idle ${(agentIdle / MiB).toFixed(1)} MiB after its transfers, peak during the upload ${(agentPeak / MiB).toFixed(1)} MiB`);
  } finally {
    for (const child of [bare.child, relayA.child, relayed.child]) child.kill();
  }
}

// -------------------------------------------------------------------------------------------- main

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-public-'));
  const scratch = mkdtempSync(join(REPO, '.bench-scratch-'));
  const stack = await startStack(dir);
  const base = stack.url;
  try {
    const call = async (method: string, path: string, token?: string, body?: unknown) => {
      const r = await fetch(base + path, {
        method,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
      return (await r.json()) as any;
    };
    const { token } = await call('POST', '/v0/signup', undefined, {});
    const project = await call('POST', '/v0/projects', token, { name: 'bench' });
    await call('POST', `/v0/projects/${project.id}/wakeup`, token);
    const { key } = await call('POST', `/v0/projects/${project.id}/keys`, token, { label: 'bench' });
    const head = await call('GET', `/v0/projects/${project.id}/head`, token);
    const engine = new URL(`http://${head.endpoint.host}:${head.endpoint.port}`);
    const setup = await request(`${base}/v2/sql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'x-svc-protocol-minor': '3', 'content-type': 'application/json' },
      body: JSON.stringify({
        statements: [
          { sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)' },
          { sql: `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS}) INSERT INTO t SELECT i, 'value ' || i FROM n` },
        ],
      }),
    });
    await setup.body.arrayBuffer();
    if (setup.statusCode !== 200) throw new Error(`setup: ${setup.statusCode}`);

    const [load1] = readFileSync('/proc/loadavg', 'utf8').split(' ');
    console.log(`public path through ${base} (${cpus().length} cores, load average ${load1}; other work on the machine colours wall-clock figures)`);
    if (SECTIONS.has('v2')) await dataPlane(base, key, engine, stack.dataplaneUrl, stack.child.pid!);
    if (SECTIONS.has('control')) await controlPlane(base, token, project.id, dir, stack.dynamoPort);
    if (SECTIONS.has('transports')) await clientTransports(base, token, project.id);
    if (SECTIONS.has('realtime')) await realtime(base, token, project.id, stack.child.pid!);
    if (SECTIONS.has('storage') || SECTIONS.has('memory')) await storage(base, token, project.id, stack.child.pid!, scratch, dir, stack.dynamoPort);
  } finally {
    const exited = new Promise((r) => stack.child.once('exit', r));
    stack.child.kill('SIGTERM');
    const t = setTimeout(() => stack.child.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(t);
    rmSync(dir, { recursive: true, force: true });
    rmSync(scratch, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--realtime-client') {
  let input = '';
  process.stdin.setEncoding('utf8').on('data', (d: string) => (input += d));
  process.stdin.on('end', () => void realtimeClient(JSON.parse(input) as RealtimeConfig));
} else {
  await main();
}
