/**
 * Object storage (docs/storage.md "Where a PUT's time goes"): PUT and GET of 1 MiB and 32 MiB
 * objects through the service against the same backend directly, in one run, on both backends:
 *   - fs: the service (handlers in miniflare → host agent → its blob files) vs a plain file write
 *     (write + fsync, as durable as the service's) and read on the same file system;
 *   - s3: the service (handlers in miniflare → s3rver) vs the SDK's PutObject/GetObject to s3rver.
 * Figures: throughput of each (MiB/s), their ratio (target ≥ 0.7), and the peak RSS of the
 * service's processes (host agent, worker host and its workerd) above idle during a 32 MiB upload
 * (target < 64 MiB), measured first on a fresh stack (the worst case: the agent's heap has not yet
 * grown) and once more after the rounds.
 *
 * Two ways of sending: one request at a time (the figures the targets are judged on), and, in
 * addition, CONCURRENCY requests in flight on both sides (clients that upload several objects at
 * once; the catalog round trips then overlap). A third row per figure, "1 hop", is the same client
 * against a server in a process of its own that does nothing but take or give the bytes: the best
 * any service behind one HTTP hop could do here, so the part of a gap that is HTTP alone shows.
 *
 * The service's client is undici's `request` (the project's HTTP client, docs/architecture.md
 * "Runtime and dependencies"), not Node's global fetch: fetch spends about 3× as long sending a
 * 32 MiB body over loopback (measured: ~100 ms against ~30 ms to a server that discards it), which
 * would be charged to the service.
 *
 *   node_modules/.bin/node test/bench/storage.bench.ts [rounds]
 *
 * Real pieces only: the local stack that `npm start` runs (DynamoDB Local, bin/svc-agent, the
 * handlers bundle in miniflare, the front), s3rver in a child process of its own. Direct, 1-hop and
 * service runs alternate in every round, so drift on the shared machine hits all of them. Build
 * first (`npm run bench` does): the stack serves dist/worker.js.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { request } from 'undici';
import { startDynamoLocal } from '../../infra/local/dynamodb.ts';
import { stopChild } from '../../infra/local/children.ts';
import { startStack, type Stack } from '../../infra/local/stack.ts';
import { S3_TEST_BUCKET, S3RVER_CREDENTIALS, s3TestSettings } from '../setup/s3rver.ts';
import { descendants, rssOf } from '../helpers/procs.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const MiB = 1024 * 1024;
const ROUNDS = Number(process.argv[2] ?? 3);
/** Operations per round and size: enough bytes per round that one slow request does not decide it. */
const OPS: Record<number, number> = { [MiB]: 16, [32 * MiB]: 2 };
/** Requests in flight in the concurrent rows, and operations per round there. */
const CONCURRENCY = 4;
const CONCURRENT_OPS: Record<number, number> = { [MiB]: 32, [32 * MiB]: 4 };

type Op = (name: string, bytes: Uint8Array<ArrayBuffer>) => Promise<void>;
type Read = (name: string) => Promise<number>;

interface Side {
  put: Op;
  get: Read;
}

/** Drains a body counting its bytes (never holding it). */
async function drain(body: ReadableStream<Uint8Array> | null): Promise<number> {
  if (!body) return 0;
  let n = 0;
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return n;
    n += value.byteLength;
  }
}

/** RSS of the service's processes by part: the agent, and the worker host with its workerd. */
function serviceRss(stack: Stack): { agent: number; worker: number; total: number } {
  const sum = (root: number) => [root, ...descendants(root)].reduce((s, pid) => s + rssOf(pid), 0);
  const agent = sum(stack.agent.pid!);
  const worker = sum(stack.workerHost.pid!);
  return { agent, worker, total: agent + worker };
}

/**
 * Runs `work` while sampling the service's RSS every 5 ms; answers the highest total above the
 * total just before (the service idle), and each part's own highest rise.
 */
async function peakAboveIdle(stack: Stack, work: () => Promise<void>): Promise<{ total: number; agent: number; worker: number }> {
  const idle = serviceRss(stack);
  const peak = { ...idle };
  const sample = () => {
    const now = serviceRss(stack);
    peak.total = Math.max(peak.total, now.total);
    peak.agent = Math.max(peak.agent, now.agent);
    peak.worker = Math.max(peak.worker, now.worker);
  };
  const timer = setInterval(sample, 5);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  sample();
  return { total: peak.total - idle.total, agent: peak.agent - idle.agent, worker: peak.worker - idle.worker };
}

/** s3rver in a process of its own, so its work and memory are neither the client's nor the service's. */
async function startS3rverProcess(): Promise<{ endpoint: string; child: ChildProcess }> {
  const script = `import { startS3rver } from ${JSON.stringify(join(REPO, 'test/setup/s3rver.ts'))};
const s = await startS3rver();
console.log(s.endpoint);
process.on('SIGTERM', () => s.stop().then(() => process.exit(0)));`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const endpoint = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      buf += d;
      if (buf.includes('\n')) resolve(buf.trim());
    });
    child.once('exit', (code) => reject(new Error(`s3rver exited with ${code}`)));
  });
  return { endpoint, child };
}

/** Signs up, creates a project and a bucket on a running stack; answers the service side. */
async function serviceSide(stack: Stack): Promise<Side> {
  const post = async (path: string, body: unknown, token?: string) => {
    const r = await fetch(`${stack.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
    if (!r.ok) throw new Error(`POST ${path}: ${r.status} ${await r.text()}`);
    return (await r.json()) as Record<string, string>;
  };
  const { token } = await post('/v0/signup', {});
  const auth = { authorization: `Bearer ${token}` };
  const { id } = await post('/v0/projects', { name: 'bench' }, token);
  const b = await fetch(`${stack.url}/v0/projects/${id}/storage/buckets/bench`, { method: 'PUT', headers: auth });
  if (b.status !== 201) throw new Error(`bucket: ${b.status}`);
  return httpSide(`${stack.url}/v0/projects/${id}/storage/objects/bench/`, auth, 200);
}

/** The bench's HTTP client: PUT bytes to `base + name` (expecting 200/201), GET them back counting. */
function httpSide(base: string, headers: Record<string, string>, getStatus: number): Side {
  return {
    async put(name, bytes) {
      const r = await request(base + name, { method: 'PUT', headers, body: bytes });
      if (r.statusCode !== 200 && r.statusCode !== 201) throw new Error(`PUT ${name}: ${r.statusCode} ${await r.body.text()}`);
      await r.body.dump();
    },
    async get(name) {
      const r = await request(base + name, { headers });
      if (r.statusCode !== getStatus) throw new Error(`GET ${name}: ${r.statusCode} ${await r.body.text()}`);
      let n = 0;
      for await (const chunk of r.body) n += (chunk as Buffer).byteLength;
      return n;
    },
  };
}

/**
 * One HTTP hop that does nothing, in a process of its own: a PUT's body is read and dropped, a GET
 * of `/<name>` answers as many bytes as the last PUT of that name had (from one buffer, as a store
 * that already holds them in memory would).
 */
async function startOneHop(): Promise<{ side: Side; child: ChildProcess }> {
  const script = `import { createServer } from 'node:http';
const sizes = new Map();
const zero = Buffer.alloc(${32 * MiB});
const server = createServer((req, res) => {
  if (req.method === 'PUT') {
    let n = 0;
    req.on('data', (c) => (n += c.length));
    req.on('end', () => { sizes.set(req.url, n); res.writeHead(201, { 'content-type': 'application/json' }).end('{}'); });
    return;
  }
  const n = sizes.get(req.url) ?? 0;
  res.writeHead(200, { 'content-length': n });
  let at = 0;
  const more = () => {
    while (at < n) {
      const k = Math.min(256 * 1024, n - at);
      at += k;
      if (!res.write(zero.subarray(0, k))) return void res.once('drain', more);
    }
    res.end();
  };
  more();
});
server.listen(0, '127.0.0.1', () => console.log('http://127.0.0.1:' + server.address().port));
process.on('SIGTERM', () => process.exit(0));`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      buf += d;
      if (buf.includes('\n')) resolve(buf.trim());
    });
    child.once('exit', (code) => reject(new Error(`the 1-hop server exited with ${code}`)));
  });
  return { side: httpSide(`${url}/`, {}, 200), child };
}

/** Plain files: write + fsync (as durable as the service's writes), and a streamed read. */
function fsSide(dir: string): Side {
  mkdirSync(dir, { recursive: true });
  return {
    async put(name, bytes) {
      const path = join(dir, name);
      await rm(path, { force: true });
      const f = await open(path, 'w');
      try {
        await f.writeFile(bytes);
        await f.sync();
      } finally {
        await f.close();
      }
    },
    async get(name) {
      const f = await open(join(dir, name), 'r');
      try {
        return await drain(f.readableWebStream() as ReadableStream<Uint8Array>);
      } finally {
        await f.close();
      }
    },
  };
}

/** The SDK straight to s3rver. */
function s3Side(endpoint: string): Side {
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { ...S3RVER_CREDENTIALS },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return {
    async put(name, bytes) {
      await client.send(new PutObjectCommand({ Bucket: S3_TEST_BUCKET, Key: `direct/${name}`, Body: bytes, ContentLength: bytes.byteLength }));
    },
    async get(name) {
      const out = await client.send(new GetObjectCommand({ Bucket: S3_TEST_BUCKET, Key: `direct/${name}` }));
      return drain(out.Body!.transformToWebStream() as ReadableStream<Uint8Array>);
    },
  };
}

interface Tally {
  bytes: number;
  seconds: number;
}

async function timed(t: Tally, bytes: number, work: () => Promise<unknown>): Promise<void> {
  const t0 = performance.now();
  await work();
  t.seconds += (performance.now() - t0) / 1000;
  t.bytes += bytes;
}

const rate = (t: Tally) => t.bytes / MiB / t.seconds;

/** Runs `ops` operations with `CONCURRENCY` in flight; the tally gets the wall-clock time of the lot. */
async function timedConcurrently(t: Tally, bytes: number, ops: number, work: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < ops) await work(next++);
    }),
  );
  t.seconds += (performance.now() - t0) / 1000;
  t.bytes += bytes * ops;
}

async function benchBackend(backend: 'fs' | 's3', dynamoEndpoint: string, s3Endpoint: string, hop: Side): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), `svc-bench-storage-${backend}-`));
  const stack = await startStack({
    dir,
    dynamoEndpoint,
    env: { SVCD_PORT: '0', SVCD_AGENT_PORT: '0', SVCD_DATAPLANE_PORT: '0', ...(backend === 's3' ? s3TestSettings(s3Endpoint) : {}) },
    agentOutput: 'collect',
    log: () => {},
  });
  try {
    const service = await serviceSide(stack);
    // The direct files sit on the same file system as the agent's blobs.
    const direct = backend === 'fs' ? fsSide(join(dir, 'direct')) : s3Side(s3Endpoint);
    const sizes = [MiB, 32 * MiB];
    const payload = new Map(sizes.map((n) => [n, new Uint8Array(n).map((_, i) => (i * 131) & 0xff) as Uint8Array<ArrayBuffer>]));

    const arms = [['direct', direct], ['1 hop', hop], ['service', service]] as const;

    // Warm every path (JIT, connections, the worker isolate) before anything is measured.
    for (const [, side] of arms) {
      await side.put('warm', payload.get(MiB)!);
      await side.get('warm');
    }

    // Memory first, before the rounds grow the heaps: the service idle (a second after the last
    // request), then its peak while one 32 MiB upload (and one download) goes through; the worst
    // of three.
    const idle = serviceRss(stack).total;
    type Peak = { total: number; agent: number; worker: number };
    const worst = (a: Peak, b: Peak): Peak => (b.total > a.total ? b : a);
    let putPeak: Peak = { total: 0, agent: 0, worker: 0 };
    let getPeak: Peak = { total: 0, agent: 0, worker: 0 };
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      putPeak = worst(putPeak, await peakAboveIdle(stack, () => service.put(`rss-${i}`, payload.get(32 * MiB)!)));
      await new Promise((r) => setTimeout(r, 1000));
      getPeak = worst(getPeak, await peakAboveIdle(stack, async () => void (await service.get(`rss-${i}`))));
    }

    const tallies = new Map<string, Tally>();
    const tally = (k: string) => tallies.get(k) ?? tallies.set(k, { bytes: 0, seconds: 0 }).get(k)!;
    const check = (label: string, size: number) => (n: number) => {
      if (n !== size) throw new Error(`${label} GET answered ${n} bytes, not ${size}`);
    };
    for (let round = 0; round < ROUNDS; round++) {
      for (const size of sizes) {
        const bytes = payload.get(size)!;
        // One request at a time (every PUT after the first round replaces an object).
        const ops = OPS[size]!;
        for (const [label, side] of arms) {
          for (let i = 0; i < ops; i++) await timed(tally(`${label} put ${size} 1`), size, () => side.put(`o${size}-${i}`, bytes));
          for (let i = 0; i < ops; i++) await timed(tally(`${label} get ${size} 1`), size, () => side.get(`o${size}-${i}`).then(check(label, size)));
        }
        // CONCURRENCY at a time, on other names.
        const many = CONCURRENT_OPS[size]!;
        for (const [label, side] of arms) {
          await timedConcurrently(tally(`${label} put ${size} ${CONCURRENCY}`), size, many, (i) => side.put(`c${size}-${i}`, bytes));
          await timedConcurrently(tally(`${label} get ${size} ${CONCURRENCY}`), size, many, (i) => side.get(`c${size}-${i}`).then(check(label, size)));
        }
      }
    }

    // And once more with the heaps as the rounds left them (the steady state of a busy service).
    await new Promise((r) => setTimeout(r, 1000));
    const warmPut = await peakAboveIdle(stack, () => service.put('rss-warm', payload.get(32 * MiB)!));

    console.log(`\nstorage, ${backend} backend: service = handlers in miniflare → ${backend === 'fs' ? 'host agent → files' : 's3rver'}; direct = ${backend === 'fs' ? 'plain file write + fsync / read' : 'SDK PutObject / GetObject to s3rver'}`);
    console.log(
      `  ${ROUNDS} alternating rounds; per round, each way and on each side: ${OPS[MiB]} × 1 MiB and ${OPS[32 * MiB]} × 32 MiB one at a time, ` +
        `then ${CONCURRENT_OPS[MiB]} × 1 MiB and ${CONCURRENT_OPS[32 * MiB]} × 32 MiB ${CONCURRENCY} at a time`,
    );
    console.log(`  "1 hop": the same client against a server that only takes or gives the bytes (the best one HTTP hop allows)`);
    for (const inFlight of [1, CONCURRENCY]) {
      console.log(inFlight === 1 ? '  one request at a time (the targets):' : `  ${CONCURRENCY} requests in flight on every side (in addition):`);
      for (const size of sizes) {
        for (const op of ['put', 'get'] as const) {
          const [d, h, s] = ['direct', '1 hop', 'service'].map((label) => rate(tally(`${label} ${op} ${size} ${inFlight}`))) as [number, number, number];
          const ratio = s / d;
          const verdict = inFlight === 1 ? ` (target >= 0.7) ${ratio >= 0.7 ? 'ok' : 'MISSED'}` : '';
          console.log(
            `    ${op.toUpperCase().padEnd(3)} ${String(size / MiB).padStart(2)} MiB   direct ${d.toFixed(1).padStart(7)} MiB/s   1 hop ${h.toFixed(1).padStart(7)} MiB/s (${(h / d).toFixed(2)})   service ${s.toFixed(1).padStart(7)} MiB/s   ratio ${ratio.toFixed(2)}${verdict}`,
          );
        }
      }
    }
    const mib = (n: number) => (n / MiB).toFixed(1);
    const parts = (p: { agent: number; worker: number }) => `agent +${mib(p.agent)}, worker host + workerd +${mib(p.worker)}`;
    console.log(`  service RSS idle ${mib(idle)} MiB (host agent + worker host + workerd)`);
    console.log(`  peak RSS above idle during a 32 MiB upload   ${mib(putPeak.total)} MiB (${parts(putPeak)}; target < 64 MiB) ${putPeak.total < 64 * MiB ? 'ok' : 'MISSED'}`);
    console.log(`  peak RSS above idle during a 32 MiB download ${mib(getPeak.total)} MiB (${parts(getPeak)})`);
    console.log(`  the same upload after the rounds (warm heaps)  ${mib(warmPut.total)} MiB (${parts(warmPut)})`);
  } finally {
    await stack.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const dynamo = await startDynamoLocal();
  const s3 = await startS3rverProcess();
  const hop = await startOneHop();
  try {
    for (const backend of ['fs', 's3'] as const) await benchBackend(backend, dynamo.endpoint, s3.endpoint, hop.side);
    const [load1] = readFileSync('/proc/loadavg', 'utf8').split(' ') as [string];
    console.log(`\nmachine: ${cpus().length} cores, load average ${load1} (other work on the machine colours the wall-clock figures)`);
  } finally {
    await stopChild(hop.child, 5000);
    await stopChild(s3.child, 5000);
    await dynamo.stop();
  }
}

await main();
