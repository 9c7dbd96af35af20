/**
 * Baseline for the /v2 proxy benchmark: point reads straight against the reference engine (docs/engine.md "Performance").
 *
 *   node_modules/.bin/node test/bench/engine.bench.ts [seconds-per-run]
 *
 * Inits a temp data directory, serves it on port 0, loads 10,000 rows, warms up, then runs
 * `POST /v2/sql {"sql":"SELECT * FROM t WHERE id = ?","params":[random id]}` through an undici Pool at
 * concurrency 1 and 16 for a fixed time each, and prints requests/s and p50/p99 latency. The client
 * runs on the same machine as the engine, so the figures include its CPU share.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { decodeEnvelope } from '../helpers/envelope.ts';

const ENGINE_BIN = fileURLToPath(new URL('../../bin/svc-engine', import.meta.url));
const ROWS = 10_000;
const SECONDS = Number(process.argv[2] ?? 5);
const WARMUP_MS = 1500;
const CONCURRENCIES = [1, 16];
const HEADERS = { 'x-svc-protocol-minor': '3', 'content-type': 'application/json' };

interface RunResult {
  concurrency: number;
  requests: number;
  errors: number;
  seconds: number;
  latenciesMs: number[];
}

async function post(pool: Pool, path: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await pool.request({ method: 'POST', path, headers: HEADERS, body: JSON.stringify(body) });
  const raw = Buffer.from(await res.body.arrayBuffer());
  return { status: res.statusCode, json: decodeEnvelope(raw) };
}

function startEngine(dataDir: string): Promise<{ proc: ReturnType<typeof spawn>; base: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(ENGINE_BIN, ['serve', '--data-dir', dataDir, '--listen', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    proc.stdout?.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      const ready = JSON.parse(out.slice(0, nl));
      if (ready.ready !== true) reject(new Error(`serve refused: ${out}`));
      else resolve({ proc, base: `http://${ready.listen}` });
    });
    proc.once('exit', (code) => reject(new Error(`serve exited ${code} before ready: ${out}`)));
  });
}

async function pointReads(pool: Pool, concurrency: number, durationMs: number): Promise<RunResult> {
  const latenciesMs: number[] = [];
  let errors = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  const worker = async () => {
    while (performance.now() < deadline) {
      const id = 1 + Math.floor(Math.random() * ROWS);
      const t0 = performance.now();
      try {
        const r = await post(pool, '/v2/sql', { sql: 'SELECT * FROM t WHERE id = ?', params: [id] });
        if (r.status !== 200 || r.json.results[0].rows[0][0] !== id) errors++;
      } catch {
        errors++;
      }
      latenciesMs.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  return { concurrency, requests: latenciesMs.length, errors, seconds, latenciesMs };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

function printTable(results: RunResult[]): void {
  const rows = results.map((r) => {
    const sorted = [...r.latenciesMs].sort((a, b) => a - b);
    return [
      String(r.concurrency),
      String(r.requests),
      (r.requests / r.seconds).toFixed(0),
      percentile(sorted, 50).toFixed(3),
      percentile(sorted, 99).toFixed(3),
      String(r.errors),
    ];
  });
  const header = ['concurrency', 'requests', 'req/s', 'p50 ms', 'p99 ms', 'errors'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padStart(widths[i] as number)).join(' | ')} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const row of rows) console.log(line(row));
}

async function main(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'svc-engine-bench-'));
  const dataDir = join(root, 'data');
  let engine: Awaited<ReturnType<typeof startEngine>> | null = null;
  let pool: Pool | null = null;
  try {
    const init = spawnSync(ENGINE_BIN, ['init', '--data-dir', dataDir, '--json'], { encoding: 'utf8' });
    if (init.status !== 0) throw new Error(`init failed: ${init.stdout}`);
    engine = await startEngine(dataDir);
    pool = new Pool(engine.base, { connections: Math.max(...CONCURRENCIES), pipelining: 1 });

    const load = await post(pool, '/v2/sql', {
      statements: [
        { sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL, created_at INTEGER)' },
        {
          sql: `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
                INSERT INTO t SELECT i, 'name-' || i, i * 0.5, 1700000000 + i FROM n`,
          params: [ROWS],
        },
      ],
    });
    if (load.status !== 200 || load.json.results[1].rows_changed !== ROWS) throw new Error(`load failed: ${JSON.stringify(load.json)}`);

    console.log(`svc-engine point reads: ${ROWS} rows, POST /v2/sql SELECT * FROM t WHERE id = ?, undici Pool, ${SECONDS} s per run`);
    console.log(`node ${process.version}, ${(await import('node:os')).availableParallelism()} CPUs shared by client and engine`);
    await pointReads(pool, 16, WARMUP_MS);
    const results: RunResult[] = [];
    for (const c of CONCURRENCIES) results.push(await pointReads(pool, c, SECONDS * 1000));
    printTable(results);
    if (results.some((r) => r.errors > 0)) process.exitCode = 1;
  } finally {
    await pool?.close();
    if (engine) {
      const exited = new Promise((r) => engine?.proc.once('exit', r));
      engine.proc.kill('SIGTERM');
      await exited;
    }
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
