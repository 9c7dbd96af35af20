/**
 * Resumable uploads (docs/storage.md "Resumable uploads"): a 1 GiB object uploaded with TUS in
 * 8 MiB PATCHes (what the SDK and the CLI send; up to 32 MiB with the second argument) through `{base_url}` and downloaded again with one
 * GET, against a bare Node server in a process of its own that writes the same bytes to a file on
 * the same file system (streamed, then fsync) and reads them back, in the same run. Figures: each
 * side's MiB/s, the ratio (target ≥ 0.5), and the peak RSS of the service's processes (host agent,
 * worker host and its workerd) above idle during the upload and the download (target < 32 MiB).
 *
 *   node_modules/.bin/node test/bench/storage-resumable.bench.ts [rounds] [chunk MiB, default 8: what the SDK and the CLI send]
 *
 * The client sends from one chunk's buffer over and over (never 1 GiB in memory) with undici's
 * `request`, the same way to both sides. Build first (`npm run bench` does): the stack serves
 * dist/worker.js. Runs on the `fs` backend (the agent's files, which the bare server's are comparable to).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { stopChild } from '../../infra/local/children.ts';
import { startDynamoLocal } from '../../infra/local/dynamodb.ts';
import { startStack, type Stack } from '../../infra/local/stack.ts';
import { descendants, rssOf } from '../helpers/procs.ts';

const MiB = 1024 * 1024;
const TOTAL = 1024 * MiB;
const CHUNK = Number(process.argv[3] ?? 8) * MiB;
const ROUNDS = Number(process.argv[2] ?? 1);
const buffer = new Uint8Array(CHUNK).map((_, i) => (i * 131) & 0xff);

/** RSS of the service by part: the agent, and the worker host with its workerd. */
function serviceRss(stack: Stack): { agent: number; worker: number } {
  const sum = (root: number) => [root, ...descendants(root)].reduce((s, pid) => s + rssOf(pid), 0);
  return { agent: sum(stack.agent.pid!), worker: sum(stack.workerHost.pid!) };
}

/** Runs `work` sampling the service's RSS every 10 ms; answers its seconds and the peaks above the RSS before. */
async function measured(stack: Stack | null, work: () => Promise<void>): Promise<{ seconds: number; peak: number; agent: number; worker: number }> {
  const idle = stack ? serviceRss(stack) : { agent: 0, worker: 0 };
  const peak = { total: idle.agent + idle.worker, ...idle };
  const sample = () => {
    const now = serviceRss(stack!);
    peak.total = Math.max(peak.total, now.agent + now.worker);
    peak.agent = Math.max(peak.agent, now.agent);
    peak.worker = Math.max(peak.worker, now.worker);
  };
  const timer = stack ? setInterval(sample, 10) : null;
  const t0 = performance.now();
  try {
    await work();
  } finally {
    if (timer) clearInterval(timer);
  }
  return { seconds: (performance.now() - t0) / 1000, peak: peak.total - idle.agent - idle.worker, agent: peak.agent - idle.agent, worker: peak.worker - idle.worker };
}

/** `TOTAL` bytes from the one buffer, as a stream (the direct side's single PUT). */
async function* totalBytes(): AsyncGenerator<Uint8Array> {
  for (let sent = 0; sent < TOTAL; sent += CHUNK) yield buffer;
}

async function drainCount(url: string, headers: Record<string, string> = {}): Promise<number> {
  const r = await request(url, { headers });
  if (r.statusCode !== 200) throw new Error(`GET ${url}: ${r.statusCode} ${await r.body.text()}`);
  let n = 0;
  for await (const chunk of r.body) n += (chunk as Buffer).byteLength;
  return n;
}

/** The bare server: PUT streams to a file then fsyncs, GET streams the file back. */
async function startBare(dir: string): Promise<{ url: string; child: ChildProcess }> {
  const script = `import { createServer } from 'node:http';
import { open } from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
const dir = ${JSON.stringify(dir)};
createServer(async (req, res) => {
  const path = dir + '/' + req.url.slice(1);
  if (req.method === 'PUT') {
    const f = await open(path, 'w');
    for await (const chunk of req) await f.write(chunk);
    await f.sync();
    await f.close();
    res.writeHead(201).end();
  } else {
    res.writeHead(200);
    await pipeline(createReadStream(path, { highWaterMark: 256 * 1024 }), res);
  }
}).listen(0, '127.0.0.1', function () { console.log('http://127.0.0.1:' + this.address().port); });`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve) => child.stdout!.setEncoding('utf8').once('data', (d: string) => resolve(d.trim())));
  return { url, child };
}

/** Signs up, makes a project and a bucket; answers the TUS endpoint, the object URL base and the headers. */
async function serviceSide(stack: Stack): Promise<{ endpoint: string; objects: string; auth: Record<string, string> }> {
  const post = async (path: string, body: unknown, token?: string) =>
    (await (await fetch(`${stack.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) })).json()) as Record<string, string>;
  const { token } = await post('/v0/signup', {});
  const auth = { authorization: `Bearer ${token}` };
  const { id } = await post('/v0/projects', { name: 'bench' }, token);
  const storage = `${stack.url}/v0/projects/${id}/storage`;
  if ((await fetch(`${storage}/buckets/bench`, { method: 'PUT', headers: auth })).status !== 201) throw new Error('bucket');
  return { endpoint: `${storage}/resumable`, objects: `${storage}/objects/bench/`, auth };
}

/** One TUS upload of `TOTAL` bytes in `CHUNK` PATCHes. */
async function tusUpload(stack: Stack, side: Awaited<ReturnType<typeof serviceSide>>, key: string): Promise<void> {
  const tus = { ...side.auth, 'tus-resumable': '1.0.0' };
  const created = await request(side.endpoint, {
    method: 'POST',
    headers: { ...tus, 'upload-length': String(TOTAL), 'upload-metadata': `bucket ${btoa('bench')},key ${btoa(key)}` },
  });
  await created.body.dump();
  if (created.statusCode !== 201) throw new Error(`POST: ${created.statusCode}`);
  const url = `${stack.url}${created.headers.location as string}`;
  for (let offset = 0; offset < TOTAL; offset += CHUNK) {
    const r = await request(url, { method: 'PATCH', headers: { ...tus, 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream' }, body: buffer });
    const text = await r.body.text();
    if (r.statusCode !== 204) throw new Error(`PATCH at ${offset}: ${r.statusCode} ${text}`);
  }
}

const mibps = (seconds: number) => TOTAL / MiB / seconds;
const fmt = (n: number) => n.toFixed(0).padStart(6);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-resumable-'));
  const dynamo = await startDynamoLocal();
  const bare = await startBare(join(dir));
  const stack = await startStack({ dir: join(dir, 'stack'), dynamoEndpoint: dynamo.endpoint, env: { SVCD_PORT: '0', SVCD_AGENT_PORT: '0', SVCD_DATAPLANE_PORT: '0' }, agentOutput: 'collect', log: () => {} });
  try {
    const side = await serviceSide(stack);
    // Warm both paths (JIT, connections, the worker isolate).
    await request(`${bare.url}/warm`, { method: 'PUT', body: buffer }).then((r) => r.body.dump());
    await drainCount(`${bare.url}/warm`);
    await tusUpload(stack, { ...side }, 'warm').catch(() => {});
    const rows: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const directUp = await measured(null, async () => {
        const r = await request(`${bare.url}/big-${round}`, { method: 'PUT', body: Readable.from(totalBytes()), headers: { 'content-length': String(TOTAL) } });
        await r.body.dump();
      });
      const directDown = await measured(null, async () => {
        if ((await drainCount(`${bare.url}/big-${round}`)) !== TOTAL) throw new Error('direct GET length');
      });
      // The same bytes as single PUTs of one chunk each: what one request costs here, for scale.
      const puts = await measured(null, async () => {
        for (let offset = 0; offset < TOTAL; offset += CHUNK) {
          const r = await request(`${side.objects}put-${round}`, { method: 'PUT', headers: side.auth, body: buffer });
          await r.body.dump();
          if (r.statusCode !== 200 && r.statusCode !== 201) throw new Error(`PUT: ${r.statusCode}`);
        }
      });
      await new Promise((r) => setTimeout(r, 1000));
      const up = await measured(stack, () => tusUpload(stack, side, `big-${round}`));
      await new Promise((r) => setTimeout(r, 1000));
      const down = await measured(stack, async () => {
        if ((await drainCount(`${side.objects}big-${round}`, side.auth)) !== TOTAL) throw new Error('service GET length');
      });
      rows.push(
        `round ${round + 1}: upload   direct ${fmt(mibps(directUp.seconds))} MiB/s  service ${fmt(mibps(up.seconds))} MiB/s  ratio ${(directUp.seconds / up.seconds).toFixed(2)} (target ≥ 0.5)  peak RSS above idle ${(up.peak / MiB).toFixed(1)} MiB (target < 32; agent ${(up.agent / MiB).toFixed(1)}, worker ${(up.worker / MiB).toFixed(1)})`,
        `round ${round + 1}: for scale, the same bytes as ${TOTAL / CHUNK} single PUTs of ${CHUNK / MiB} MiB: ${fmt(mibps(puts.seconds))} MiB/s`,
        `round ${round + 1}: download direct ${fmt(mibps(directDown.seconds))} MiB/s  service ${fmt(mibps(down.seconds))} MiB/s  ratio ${(directDown.seconds / down.seconds).toFixed(2)} (target ≥ 0.5)  peak RSS above idle ${(down.peak / MiB).toFixed(1)} MiB (target < 32; agent ${(down.agent / MiB).toFixed(1)}, worker ${(down.worker / MiB).toFixed(1)})`,
      );
      console.log(rows.slice(-3).join('\n'));
      rmSync(join(dir, `big-${round}`), { force: true });
    }
    console.log(`resumable uploads, 1 GiB in ${CHUNK / MiB} MiB PATCHes through {base_url} (fs backend) against a bare Node server (write + fsync, read):\n${rows.join('\n')}`);
  } finally {
    await stack.stop();
    await stopChild(bare.child, 5000);
    await dynamo.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
