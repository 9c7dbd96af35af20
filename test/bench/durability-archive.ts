/**
 * Export and import against a bare copy of the same bytes (docs/lifecycle.md "Export and import";
 * the lead's test/bench/durability.bench.ts calls `benchArchive`, and this file runs alone too:
 * `node_modules/.bin/node test/bench/durability-archive.ts [MiB=100] [rounds=3]`, after `node build.mjs`).
 *
 * For a tenant of about `megabytes` MiB, in one run, rounds interleaved so drift hits every side:
 *   - export: `GET …/snapshots/{id}/archive` through the stack's origin, streamed to a file;
 *   - import: `POST …/import` of that file (unpack, the engine's verify, adoption, the engine's restore);
 *   - baseline: a bare copy of the same bytes (the backup directory's files streamed into one file
 *     on the same file system), and for the import also the engine's verify + restore alone on the same
 *     backup, so that what the import adds to the engine's own work shows;
 *   - the peak RSS of the service's processes (agent and worker host with their children) above idle
 *     during each, sampled every 5 ms: flat memory is a peak that does not grow with the archive.
 */
import { spawnSync } from 'node:child_process';
import { createReadStream, createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import type { Stack } from '../../infra/local/stack.ts';
import { issueInternalToken } from '../../shared/auth.ts';
import { internalPaths } from '../../shared/internal-paths.ts';
import { descendants, rssOf } from '../helpers/procs.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const MiB = 1024 * 1024;

/** What `benchArchive` measured (seconds are medians over the rounds). */
export interface ArchiveFigures {
  bytes: number;
  exportSeconds: number;
  /** The same export from the agent's internal route alone (no front, no handlers): what the hops cost. */
  exportAgentSeconds: number;
  importSeconds: number;
  bareCopySeconds: number;
  engineVerifyRestoreSeconds: number;
  exportRatio: number;
  importRatio: number;
  exportPeakRss: number;
  importPeakRss: number;
}

/** What the bench needs of a running stack, and optionally a project to use (else one is made). */
export interface ArchiveBenchOptions {
  megabytes?: number;
  rounds?: number;
  print?: (line: string) => void;
}

export interface Api {
  token: string;
  call(method: string, path: string, body?: unknown): Promise<any>;
}

export async function apiOf(stack: Stack): Promise<Api> {
  const send = async (method: string, path: string, body: unknown, token?: string) => {
    const r = await request(`${stack.url}${path}`, {
      method: method as 'GET',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.body.text();
    if (r.statusCode >= 300) throw new Error(`${method} ${path}: ${r.statusCode} ${text}`);
    return text ? JSON.parse(text) : null;
  };
  const { token } = await send('POST', '/v0/signup', {});
  return { token, call: (method, path, body) => send(method, path, body, token) };
}

/** Runs one SQL statement on the engine's loopback listener (the project's own `/v2` is not the point here). */
export async function engineSql(address: string, sql: string): Promise<void> {
  const r = await request(`http://${address}/v2/sql`, { method: 'POST', headers: { 'x-svc-protocol-minor': '3', 'content-type': 'application/json' }, body: JSON.stringify({ sql, params: [] }) });
  await r.body.arrayBuffer();
  if (r.statusCode !== 200) throw new Error(`engine sql ${r.statusCode}`);
}

/** A sleeping project of about `megabytes` MiB and a snapshot of it. */
export async function bigSnapshot(api: Api, megabytes: number): Promise<{ id: string; snap: any }> {
  const { id } = await api.call('POST', '/v0/projects', { name: 'bench-archive' });
  await api.call('POST', `/v0/projects/${id}/wakeup`);
  const { endpoint } = await api.call('GET', `/v0/projects/${id}/head`);
  await engineSql(endpoint.address, 'CREATE TABLE t (v BLOB)');
  const batches = Math.ceil((megabytes * MiB) / (1000 * 4096));
  for (let i = 0; i < batches; i++) {
    await engineSql(endpoint.address, 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) INSERT INTO t SELECT randomblob(4096) FROM c');
  }
  await api.call('POST', `/v0/projects/${id}/sleep`);
  const snap = await api.call('POST', `/v0/projects/${id}/snapshots`, { label: 'bench' });
  return { id, snap };
}

function serviceRss(stack: Stack): number {
  const roots = [...stack.agents.map((a) => a.process.pid!), stack.workerHost.pid!];
  return roots.flatMap((root) => [root, ...descendants(root)]).reduce((sum, pid) => sum + rssOf(pid), 0);
}

/** Runs `work`, sampling the service's RSS every 5 ms; answers seconds and the peak above idle. */
export async function measured(stack: Stack, work: () => Promise<void>): Promise<{ seconds: number; peak: number }> {
  const idle = serviceRss(stack);
  let peak = idle;
  const timer = setInterval(() => (peak = Math.max(peak, serviceRss(stack))), 5);
  const t0 = performance.now();
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  const seconds = (performance.now() - t0) / 1000;
  return { seconds, peak: Math.max(0, Math.max(peak, serviceRss(stack)) - idle) };
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
export const mb = (n: number) => (n / MiB).toFixed(1);

/** Measures export and import on `stack` against a bare copy of the same bytes; prints and answers the figures. */
export async function benchArchive(stack: Stack, options: ArchiveBenchOptions = {}): Promise<ArchiveFigures> {
  const print = options.print ?? ((line: string) => console.log(line));
  const megabytes = options.megabytes ?? 100;
  const rounds = options.rounds ?? 3;
  const api = await apiOf(stack);
  const source = await bigSnapshot(api, megabytes);
  const target = await bigSnapshot(api, 1);
  const work = mkdtempSync(join(stack.dir, 'bench-archive-'));
  // On whichever agent the project was placed (the durability bench runs two).
  const backupDir = stack.agents.map((a) => join(a.root, 'snapshots', source.id, source.snap.id)).find((d) => existsSync(d))!;
  const files = ['manifest.json', 'meta.json', 'data.sqlite'].map((f) => join(backupDir, f));
  const archiveFile = join(work, 'archive.tar');
  const engine = join(REPO, 'bin/svc-engine');
  const times = { exp: [] as number[], agent: [] as number[], imp: [] as number[], bare: [] as number[], engine: [] as number[] };
  const internalToken = await issueInternalToken(stack.env.SVCD_INTERNAL_SECRET!);
  let exportPeak = 0;
  let importPeak = 0;
  try {
    for (let round = 0; round < rounds; round++) {
      // Baseline: the same bytes, streamed into one file on the same file system.
      const bare = join(work, `bare-${round}`);
      const t0 = performance.now();
      const out = createWriteStream(bare);
      for (const f of files) await pipeline(createReadStream(f, { highWaterMark: MiB }), out, { end: false });
      await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
      times.bare.push((performance.now() - t0) / 1000);
      rmSync(bare, { force: true });

      const exp = await measured(stack, async () => {
        const r = await request(`${stack.url}/v0/projects/${source.id}/snapshots/${source.snap.id}/archive`, { headers: { authorization: `Bearer ${api.token}` } });
        if (r.statusCode !== 200) throw new Error(`export ${r.statusCode}`);
        await pipeline(r.body, createWriteStream(archiveFile));
      });
      times.exp.push(exp.seconds);
      exportPeak = Math.max(exportPeak, exp.peak);

      const a0 = performance.now();
      const direct = await request(new URL(internalPaths.snapshotArchive(source.id, source.snap.id), stack.agents[0]!.internalUrl), { headers: { authorization: `Bearer ${internalToken}` } });
      await pipeline(direct.body, createWriteStream(join(work, 'direct.tar')));
      times.agent.push((performance.now() - a0) / 1000);
      rmSync(join(work, 'direct.tar'), { force: true });

      const size = statSync(archiveFile).size;
      const imp = await measured(stack, async () => {
        const r = await request(`${stack.url}/v0/projects/${target.id}/import`, {
          method: 'POST',
          headers: { authorization: `Bearer ${api.token}`, 'content-type': 'application/x-tar', 'content-length': String(size) },
          body: createReadStream(archiveFile, { highWaterMark: MiB }),
        });
        const text = await r.body.text();
        if (r.statusCode !== 200) throw new Error(`import ${r.statusCode} ${text}`);
      });
      times.imp.push(imp.seconds);
      importPeak = Math.max(importPeak, imp.peak);

      // The engine's own share of an import, alone: verify, then restore into a fresh directory.
      const restored = join(work, `restored-${round}`);
      const e0 = performance.now();
      for (const args of [['verify', '--backup', backupDir, '--json'], ['restore', '--backup', backupDir, '--target', restored, '--json']]) {
        const r = spawnSync(engine, args, { encoding: 'utf8' });
        if (r.status !== 0) throw new Error(`engine ${args[0]}: ${r.stdout}${r.stderr}`);
      }
      times.engine.push((performance.now() - e0) / 1000);
      rmSync(restored, { recursive: true, force: true });
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const bytes = files.reduce((s, f) => s + statSync(f).size, 0);
  const figures: ArchiveFigures = {
    bytes,
    exportSeconds: median(times.exp),
    exportAgentSeconds: median(times.agent),
    importSeconds: median(times.imp),
    bareCopySeconds: median(times.bare),
    engineVerifyRestoreSeconds: median(times.engine),
    exportRatio: median(times.bare) / median(times.exp),
    importRatio: median(times.bare) / Math.max(1e-9, median(times.imp) - median(times.engine)),
    exportPeakRss: exportPeak,
    importPeakRss: importPeak,
  };
  const rate = (s: number) => `${(bytes / MiB / s).toFixed(0)} MiB/s`;
  print(`archive of ${mb(bytes)} MiB (median of ${rounds} rounds, interleaved)`);
  print(`baseline: bare copy of the same bytes:            ${figures.bareCopySeconds.toFixed(3)} s  ${rate(figures.bareCopySeconds)}`);
  print(`export (GET …/archive → file):                    ${figures.exportSeconds.toFixed(3)} s  ${rate(figures.exportSeconds)}  ratio ${figures.exportRatio.toFixed(2)} (target ≥ 0.5)`);
  print(`  the agent's internal route alone (no front, no handlers): ${figures.exportAgentSeconds.toFixed(3)} s  ${rate(figures.exportAgentSeconds)}  ratio ${(figures.bareCopySeconds / figures.exportAgentSeconds).toFixed(2)}`);
  print(`import (POST …/import, unpack + verify + restore): ${figures.importSeconds.toFixed(3)} s  ${rate(figures.importSeconds)}  raw ratio ${(figures.bareCopySeconds / figures.importSeconds).toFixed(2)}`);
  print(`baseline: engine verify + restore alone:          ${figures.engineVerifyRestoreSeconds.toFixed(3)} s`);
  print(`import's streaming beside the engine's work:      ${(figures.importSeconds - figures.engineVerifyRestoreSeconds).toFixed(3)} s  ratio ${figures.importRatio.toFixed(2)} (target ≥ 0.5)`);
  print(`peak RSS of the service above idle: export ${mb(exportPeak)} MiB, import ${mb(importPeak)} MiB (archive ${mb(bytes)} MiB)`);
  return figures;
}

// Alone: a local stack of its own (DynamoDB Local, one agent, the built handlers).
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { startStack } = await import('../../infra/local/stack.ts');
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-archive-'));
  mkdirSync(dir, { recursive: true });
  const stack = await startStack({ dir, env: { SVCD_PORT: '0', SVCD_AGENT_PORT: '0', SVCD_DATAPLANE_PORT: '0', SVCD_METRICS_PORT: '0' }, agentOutput: 'collect', log: () => {} });
  try {
    await benchArchive(stack, { megabytes: Number(process.argv[2] ?? 100), rounds: Number(process.argv[3] ?? 3) });
  } finally {
    await stack.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
