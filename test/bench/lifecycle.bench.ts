/**
 * Lifecycle benchmark (docs/lifecycle.md "Benchmark"):
 *
 *   node_modules/.bin/node test/bench/lifecycle.bench.ts [cold-wakeups] [concurrent]
 *
 * 1. Cold wakeup latency, p50/p95 over 20 wakeups of sleeping tenants (data directory initialized,
 *    no engine running), through the public API (handlers in process → internal HTTP → host agent →
 *    engine ready line → capabilities probe → state recorded in DynamoDB), as a ratio to the baseline
 *    measured in the same run, interleaved with it: spawning the engine directly and waiting for its
 *    ready line (target ≤ 1.3). The baseline spawns the engine with the same environment the agent
 *    gives engines (the Node compile cache); the figure without it is printed too.
 * 2. Sleep latency (SIGTERM, graceful exit awaited, state recorded), p50/p95.
 * 3. 50 concurrent wakeups of different sleeping projects: total time as a ratio to one wakeup (the
 *    cold p50 above) (target ≤ 10); beside it the machine's floor, 50 engines spawned directly at once.
 * First starts (stopped → running, including `engine init`) are printed for information.
 *
 * Starts its own DynamoDB Local and an in-process agent on a temp root; removes everything after.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { buildDeps } from '../../handlers/deps.ts';
import { createApp, type App } from '../../handlers/index.ts';
import { startAgent } from '../../host-agent/agent.ts';
import { engineEnvironment } from '../../host-agent/engine-cli.ts';
import { startDynamoLocal } from '../../infra/local/dynamodb.ts';
import { loadSettings } from '../../shared/config.ts';
import { createDb, ensureTable } from '../../shared/db/client.ts';
import { deploymentEnv } from '../helpers/deployment-env.ts';

const REPO = resolve(import.meta.dirname, '../..');
const ENGINE = join(REPO, 'bin/svc-engine');
const COLD = Number(process.argv[2] ?? 20);
const CONCURRENT = Number(process.argv[3] ?? 50);

function pct(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}
const ms = (v: number) => `${v.toFixed(1)} ms`;

/** Baseline: spawn `serve` directly and wait for its ready line; then stop it (not timed). */
async function directStart(dataDir: string, env: NodeJS.ProcessEnv): Promise<number> {
  const t0 = performance.now();
  const child = spawn(ENGINE, ['serve', '--data-dir', dataDir, '--listen', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'ignore'], env, detached: true });
  const exited = new Promise((r) => child.once('exit', r));
  await new Promise<void>((ok, fail) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (out.includes('\n')) ok();
    });
    child.once('exit', (code) => fail(new Error(`engine exited ${code}: ${out}`)));
  });
  const elapsed = performance.now() - t0;
  child.kill('SIGTERM');
  await exited;
  return elapsed;
}

async function main(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'svc-bench-lifecycle-'));
  // A root agent runs engines as their own user, who must reach SVCD_ROOT inside (docs/lifecycle.md "Engine isolation").
  chmodSync(root, 0o711);
  const dynamo = await startDynamoLocal();
  const env = deploymentEnv(dynamo.endpoint, {
    SVCD_TABLE: 'bench_lifecycle',
    SVCD_ROOT: join(root, 'agent'),
    SVCD_ENGINE_BIN: ENGINE,
    SVCD_ENGINE_START_TIMEOUT_MS: '60000',
  });
  const settings = loadSettings(env);
  const db = createDb(settings);
  await ensureTable(db);
  const agent = await startAgent(settings, { db, cwd: REPO, log: () => {} });
  const app: App = createApp(buildDeps(env, () => {}));
  const req = async (method: string, path: string, token?: string, body?: unknown): Promise<any> => {
    const headers: Record<string, string> = {};
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const r = await app.fetch(new Request(`http://svc.bench${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }));
    const json = await r.json();
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json)}`);
    return json;
  };

  try {
    const { token } = await req('POST', '/v0/signup', undefined, {});
    const newProject = async () => (await req('POST', '/v0/projects', token, { name: 'bench' })).id as string;
    const timed = async (fn: () => Promise<unknown>) => {
      const t0 = performance.now();
      await fn();
      return performance.now() - t0;
    };

    console.log(`lifecycle bench: ${cpus().length} CPUs, ${COLD} cold wakeups, ${CONCURRENT} concurrent`);

    // First starts (includes engine init), which also prepares the tenants measured below.
    const cold = await Promise.all(Array.from({ length: COLD }, newProject));
    const first: number[] = [];
    for (const id of cold) {
      first.push(await timed(() => req('POST', `/v0/projects/${id}/wakeup`, token)));
      await req('POST', `/v0/projects/${id}/sleep`, token);
    }

    // The baseline directory: initialized by the engine itself.
    const baselineDir = join(root, 'baseline', 'data');
    await new Promise<void>((ok, fail) => {
      const c = spawn(ENGINE, ['init', '--data-dir', baselineDir, '--json'], { stdio: 'ignore' });
      c.once('exit', (code) => (code === 0 ? ok() : fail(new Error(`init exited ${code}`))));
    });
    const engineEnv = engineEnvironment(agent.ctx.tenants.layout.compileCache);
    const plainEnv = engineEnvironment(null);
    // Warm-up of both paths (compile cache, DynamoDB Local's JIT).
    await directStart(baselineDir, engineEnv);
    await directStart(baselineDir, plainEnv);

    // Interleaved: baseline, wakeup, sleep, baseline without cache; so machine load hits all alike.
    const baseline: number[] = [];
    const baselinePlain: number[] = [];
    const wakeups: number[] = [];
    const sleeps: number[] = [];
    for (const id of cold) {
      baseline.push(await directStart(baselineDir, engineEnv));
      wakeups.push(await timed(() => req('POST', `/v0/projects/${id}/wakeup`, token)));
      sleeps.push(await timed(() => req('POST', `/v0/projects/${id}/sleep`, token)));
      baselinePlain.push(await directStart(baselineDir, plainEnv));
    }

    // Concurrent wakeups of different projects, all sleeping and initialized.
    const many = await Promise.all(Array.from({ length: CONCURRENT }, newProject));
    for (let i = 0; i < many.length; i += 5) {
      await Promise.all(many.slice(i, i + 5).map(async (id) => {
        await req('POST', `/v0/projects/${id}/wakeup`, token);
        await req('POST', `/v0/projects/${id}/sleep`, token);
      }));
    }
    // The machine's own floor: the same number of engines spawned directly, at once.
    const directTotal = await timed(() => Promise.all(many.map((id) => directStart(agent.ctx.tenants.layout.dataDir(id), engineEnv))));
    const single = pct(wakeups, 50);
    const total = await timed(() => Promise.all(many.map((id) => req('POST', `/v0/projects/${id}/wakeup`, token))));
    const running = agent.ctx.tenants.runningProjects().length;
    await Promise.all(many.map((id) => req('POST', `/v0/projects/${id}/sleep`, token)));

    const p50 = pct(wakeups, 50);
    const p95 = pct(wakeups, 95);
    const b50 = pct(baseline, 50);
    const b95 = pct(baseline, 95);
    console.log(`baseline: engine spawn → ready line (agent's engine env): p50 ${ms(b50)}  p95 ${ms(b95)}`);
    console.log(`baseline: engine spawn → ready line (no compile cache):   p50 ${ms(pct(baselinePlain, 50))}  p95 ${ms(pct(baselinePlain, 95))}`);
    console.log(`cold wakeup (sleeping → running) via the API:              p50 ${ms(p50)}  p95 ${ms(p95)}`);
    console.log(`  ratio to baseline: p50 ${(p50 / b50).toFixed(2)}  p95 ${(p95 / b95).toFixed(2)}  (target ≤ 1.3)`);
    console.log(`  added by the service: p50 ${ms(p50 - b50)}`);
    console.log(`first start (stopped → running, with engine init):        p50 ${ms(pct(first, 50))}  p95 ${ms(pct(first, 95))}`);
    console.log(`sleep (SIGTERM → exit awaited → state recorded):           p50 ${ms(pct(sleeps, 50))}  p95 ${ms(pct(sleeps, 95))}`);
    console.log(`${CONCURRENT} concurrent wakeups of different projects: total ${ms(total)} (${running} engines running)`);
    console.log(`  ratio to one wakeup (p50 ${ms(single)}): ${(total / single).toFixed(2)}  (target ≤ 10)`);
    console.log(`  floor of this machine: ${CONCURRENT} engines spawned directly at once → ready: ${ms(directTotal)}, ${(directTotal / b50).toFixed(2)} × one direct spawn`);
  } finally {
    await agent.stop();
    await dynamo.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
