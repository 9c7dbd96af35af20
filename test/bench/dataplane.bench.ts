/**
 * `/v2` point reads through the host agent's forwarding listener against the same engine directly
 * (docs/dataplane.md "Benchmark"), in one run, same client (an undici Pool) and concurrency 16:
 * throughput ratio (target ≥ 0.8), added p50 latency (target ≤ 0.5 ms), and DynamoDB calls per
 * 1,000 warm `/v2` requests (target 0).
 *
 *   node_modules/.bin/node test/bench/dataplane.bench.ts [seconds-per-round]
 *
 * Real pieces only: DynamoDB Local, the host agent as its own process (bin/svc-agent), the reference
 * engine it starts, the handlers in this process for signup, project, wakeup and key. The agent's
 * DynamoDB endpoint is a counting forwarder in this process, so every DynamoDB request the agent
 * makes is counted by operation; its heartbeat is set to 10 min so none falls inside the window.
 * Direct and proxied rounds alternate (D P D P ...) so drift on the shared machine hits both.
 *
 * A third arm measures what any forwarder costs on this machine: a bare TCP relay (its own process,
 * one engine connection per client connection, bytes written straight through: no HTTP parsing, no
 * authentication, nothing the agent must do). Client, forwarder and engine share the 2 cores, so
 * every forwarder pays two more loopback hops in CPU the client and engine would otherwise use;
 * the relay's ratio is the ceiling a forwarding agent can reach here, printed beside the target.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { buildDeps } from '../../handlers/deps.ts';
import { createApp } from '../../handlers/index.ts';
import { getAgent } from '../../shared/db/agents.ts';
import { createDb, ensureTable } from '../../shared/db/client.ts';
import { loadSettings } from '../../shared/config.ts';
import { startDynamoLocal } from '../../infra/local/dynamodb.ts';
import { deploymentEnv } from '../helpers/deployment-env.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const SECONDS = Number(process.argv[2] ?? 4);
const ROUNDS = 3;
const CONCURRENCY = 16;
const ROWS = 1000;
const WARMUP_MS = 1500;

interface Round {
  requests: number;
  errors: number;
  seconds: number;
  latencies: number[];
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

/** `concurrency` workers issuing point reads for `ms` milliseconds through `pool`. */
async function load(pool: Pool, headers: Record<string, string>, ms: number, concurrency = CONCURRENCY): Promise<Round> {
  const latencies: number[] = [];
  let errors = 0;
  const start = performance.now();
  const end = start + ms;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const id = 1 + Math.floor(Math.random() * ROWS);
        const t0 = performance.now();
        const r = await pool.request({
          method: 'POST',
          path: '/v2/sql',
          headers,
          body: `{"sql":"SELECT id, v FROM t WHERE id = ?","params":[${id}]}`,
        });
        const body = await r.body.arrayBuffer();
        if (r.statusCode !== 200 || body.byteLength < 12) errors++;
        latencies.push(performance.now() - t0);
      }
    }),
  );
  return { requests: latencies.length, errors, seconds: (performance.now() - start) / 1000, latencies };
}

/** A forwarder in front of DynamoDB Local that counts requests by operation (X-Amz-Target). */
async function countingDynamo(target: string): Promise<{ url: string; counts: Map<string, number>; close(): void }> {
  const counts = new Map<string, number>();
  const upstream = new URL(target);
  const server = createServer((req, res) => {
    const op = String(req.headers['x-amz-target'] ?? 'unknown').split('.').pop()!;
    counts.set(op, (counts.get(op) ?? 0) + 1);
    const out = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, counts, close: () => server.close() };
}

/** The bare TCP relay (see the header): a child process relaying `port` to the engine, and its port. */
async function startRelay(engineHost: string, enginePort: number): Promise<{ child: ChildProcess; url: string }> {
  const source = `
    const net = require('node:net');
    const server = net.createServer((c) => {
      c.setNoDelay(true);
      const u = net.connect(${enginePort}, ${JSON.stringify(engineHost)});
      u.setNoDelay(true);
      c.on('data', (d) => u.write(d));
      u.on('data', (d) => c.write(d));
      c.on('close', () => u.destroy());
      u.on('close', () => c.destroy());
      c.on('error', () => {});
      u.on('error', () => {});
    });
    server.listen(0, '127.0.0.1', () => console.log(server.address().port));`;
  const child = spawn(process.execPath, ['-e', source], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout!.setEncoding('utf8').once('data', (d: string) => resolve(d.trim()));
    child.once('exit', (code) => reject(new Error(`relay exited ${code}`)));
  });
  return { child, url: `http://127.0.0.1:${port}` };
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */
function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

function total(counts: Map<string, number>): number {
  let n = 0;
  for (const v of counts.values()) n += v;
  return n;
}

async function main(): Promise<void> {
  const dynamo = await startDynamoLocal();
  const counter = await countingDynamo(dynamo.endpoint);
  const root = mkdtempSync(join(tmpdir(), 'svc-bench-dataplane-'));
  const env = deploymentEnv(dynamo.endpoint, {
    SVCD_TABLE: `bench_${randomBytes(4).toString('hex')}`,
    SVCD_ROOT: root,
    SVCD_HEARTBEAT_MS: '600000',
    SVCD_AGENT_STALE_MS: '3600000',
  });
  const db = createDb(loadSettings(env));
  await ensureTable(db);

  let agent: ChildProcess | undefined;
  try {
    agent = spawn(join(REPO, 'bin/svc-agent'), [], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env, SVCD_DYNAMODB_ENDPOINT: counter.url },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const ready = await new Promise<{ agent_id: string }>((resolve, reject) => {
      let out = '';
      agent!.stdout!.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        const nl = out.indexOf('\n');
        if (nl >= 0) resolve(JSON.parse(out.slice(0, nl)));
      });
      agent!.once('exit', (code) => reject(new Error(`agent exited ${code} during start`)));
    });
    const registered = await getAgent(db, ready.agent_id);
    const dataplaneUrl = registered!.dataplane_url;

    const app = createApp(buildDeps(env, () => {}));
    const call = async (method: string, path: string, token?: string, body?: unknown) => {
      const r = await app.fetch(
        new Request(`http://svc.test${path}`, {
          method,
          headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        }),
      );
      if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
      return (await r.json()) as any;
    };
    const { token } = await call('POST', '/v0/signup', undefined, {});
    const project = await call('POST', '/v0/projects', token, { name: 'bench' });
    await call('POST', `/v0/projects/${project.id}/wakeup`, token);
    const { key } = await call('POST', `/v0/projects/${project.id}/keys`, token, { label: 'bench' });
    const head = await call('GET', `/v0/projects/${project.id}/head`, token);
    const engineUrl = `http://${head.endpoint.host}:${head.endpoint.port}`;

    const base = { 'x-svc-protocol-minor': '3', 'content-type': 'application/json' };
    const viaAgent = { ...base, authorization: `Bearer ${key}` };
    const direct = new Pool(engineUrl, { connections: CONCURRENCY });
    const proxied = new Pool(dataplaneUrl, { connections: CONCURRENCY });
    const setup = await direct.request({
      method: 'POST',
      path: '/v2/sql',
      headers: base,
      body: JSON.stringify({
        statements: [
          { sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)' },
          { sql: `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS}) INSERT INTO t SELECT i, 'value ' || i FROM n` },
        ],
      }),
    });
    await setup.body.arrayBuffer();
    if (setup.statusCode !== 200) throw new Error(`setup failed: ${setup.statusCode}`);

    const relay = await startRelay(head.endpoint.host, head.endpoint.port);
    const relayed = new Pool(relay.url, { connections: CONCURRENCY });

    await load(direct, base, WARMUP_MS);
    await load(proxied, viaAgent, WARMUP_MS);
    await load(relayed, base, WARMUP_MS);

    const enginePid = (JSON.parse(readFileSync(join(root, 'run', `${project.id}.json`), 'utf8')) as { pid: number }).pid;
    const cpu = { engineDirect: 0, engineProxied: 0, agent: 0, relay: 0 };
    const d: Round[] = [];
    const p: Round[] = [];
    const f: Round[] = [];
    const callsBefore = total(counter.counts);
    const before = new Map(counter.counts);
    for (let i = 0; i < ROUNDS; i++) {
      let e0 = cpuSeconds(enginePid);
      d.push(await load(direct, base, SECONDS * 1000));
      cpu.engineDirect += cpuSeconds(enginePid) - e0;
      e0 = cpuSeconds(enginePid);
      const a0 = cpuSeconds(agent.pid!);
      p.push(await load(proxied, viaAgent, SECONDS * 1000));
      cpu.engineProxied += cpuSeconds(enginePid) - e0;
      cpu.agent += cpuSeconds(agent.pid!) - a0;
      const calls = total(counter.counts);
      const r0 = cpuSeconds(relay.child.pid!);
      f.push(await load(relayed, base, SECONDS * 1000));
      cpu.relay += cpuSeconds(relay.child.pid!) - r0;
      if (total(counter.counts) !== calls) throw new Error('DynamoDB was called while only the relay ran');
    }
    const calls = total(counter.counts) - callsBefore;
    // For information: the hop's own latency without queueing (one request at a time).
    const d1 = await load(direct, base, 2000, 1);
    const p1 = await load(proxied, viaAgent, 2000, 1);
    const byOp = [...counter.counts].map(([op, n]) => [op, n - (before.get(op) ?? 0)] as const).filter(([, n]) => n > 0);

    const summarize = (rounds: Round[]) => {
      const latencies = rounds.flatMap((r) => r.latencies).sort((x, y) => x - y);
      const requests = rounds.reduce((s, r) => s + r.requests, 0);
      const seconds = rounds.reduce((s, r) => s + r.seconds, 0);
      return {
        requests,
        errors: rounds.reduce((s, r) => s + r.errors, 0),
        rps: requests / seconds,
        p50: quantile(latencies, 0.5),
        p99: quantile(latencies, 0.99),
      };
    };
    const sd = summarize(d);
    const sp = summarize(p);
    const sf = summarize(f);
    const ratio = sp.rps / sd.rps;
    const addedP50 = sp.p50 - sd.p50;
    const perThousand = (calls / sp.requests) * 1000;
    const row = (name: string, s: ReturnType<typeof summarize>) =>
      `${name.padEnd(22)} ${s.rps.toFixed(0).padStart(7)} req/s   p50 ${s.p50.toFixed(3)} ms   p99 ${s.p99.toFixed(3)} ms   (${s.requests} requests, ${s.errors} errors)`;

    console.log(`dataplane: POST /v2/sql point reads, concurrency ${CONCURRENCY}, ${ROUNDS} alternating rounds of ${SECONDS} s each`);
    console.log(row('direct to the engine', sd));
    console.log(row('through the agent', sp));
    console.log(row('bare TCP relay (floor)', sf));
    console.log(`throughput ratio        ${ratio.toFixed(3)}   (target >= 0.8)   ${ratio >= 0.8 ? 'ok' : 'MISSED'}`);
    console.log(`added p50 latency       ${addedP50.toFixed(3)} ms   (target <= 0.5 ms)   ${addedP50 <= 0.5 ? 'ok' : 'MISSED'}`);
    console.log(`ceiling of this machine: a bare TCP relay reaches ratio ${(sf.rps / sd.rps).toFixed(3)}, added p50 ${(sf.p50 - sd.p50).toFixed(3)} ms; the agent reaches ${(sp.rps / sf.rps).toFixed(3)} of the relay's throughput`);
    console.log(`DynamoDB calls / 1,000 warm /v2 requests   ${perThousand.toFixed(3)}   (${calls} calls in ${sp.requests} requests${byOp.length ? `: ${byOp.map(([o, n]) => `${o} ${n}`).join(', ')}` : ''}; target 0)   ${calls === 0 ? 'ok' : 'MISSED'}`);
    const p50of = (r: Round) => quantile([...r.latencies].sort((x, y) => x - y), 0.5);
    console.log(`concurrency 1 (info)    p50 ${p50of(d1).toFixed(3)} ms direct, ${p50of(p1).toFixed(3)} ms through the agent: ${(p50of(p1) - p50of(d1)).toFixed(3)} ms added`);
    const us = (seconds: number, requests: number) => ((seconds / requests) * 1e6).toFixed(0);
    console.log(`CPU per request         engine ${us(cpu.engineDirect, sd.requests)} µs direct, ${us(cpu.engineProxied, sp.requests)} µs proxied; agent ${us(cpu.agent, sp.requests)} µs; bare relay ${us(cpu.relay, sf.requests)} µs`);
    const [load1] = (readFileSync('/proc/loadavg', 'utf8').split(' ') as [string]);
    console.log(`machine: ${(await import('node:os')).cpus().length} cores, load average ${load1} (other work on the machine colours the wall-clock figures)`);
    if (sd.errors || sp.errors || sf.errors) process.exitCode = 1;
    await direct.close();
    await proxied.close();
    await relayed.close();
    relay.child.kill();
  } finally {
    if (agent && agent.exitCode === null) {
      const exited = new Promise((r) => agent!.once('exit', r));
      agent.kill('SIGTERM');
      const t = setTimeout(() => agent!.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(t);
    }
    counter.close();
    await dynamo.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
