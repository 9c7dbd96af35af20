/**
 * Durability benchmark (docs/durability.md "Benchmark"): `npm run bench -- durability`, or
 * `node_modules/.bin/node test/bench/durability.bench.ts [MiB=100] [rounds=3]` after `node build.mjs`.
 *
 * A local stack of two agents (its own DynamoDB Local, the `fs` backend with the stack's backup
 * directory as the off-machine store) and a tenant of about `MiB` MiB. Every figure is a ratio to a
 * baseline measured in the same run, rounds interleaved so the machine's drift hits both sides:
 *   - relocation (the data changed since the last snapshot) vs. the engine's backup + a copy of the
 *     backup directory + the engine's restore, timed alone (target ≤ 1.5);
 *   - restore after agent loss (kill -9, declare lost, restored on the other agent) vs. a copy of
 *     the off-machine copy + the engine's restore alone (target ≤ 1.5);
 *   - fork vs. a copy of the backup directory (target ≤ 1.5);
 *   - export and import vs. a bare copy of the same bytes (target ≥ 0.5), with the service's peak
 *     RSS (./durability-archive.ts);
 * and the recovery point (age of the newest off-machine copy) the loss drill ended with.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createAgentClient } from '../../shared/agent-client.ts';
import { startStack, type Stack } from '../../infra/local/stack.ts';
import { getAgent } from '../../shared/db/agents.ts';
import { createDb } from '../../shared/db/client.ts';
import { getProject } from '../../shared/db/projects.ts';
import { internalPaths } from '../../shared/internal-paths.ts';
import { apiOf, benchArchive, bigSnapshot, engineSql, median, type Api } from './durability-archive.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const ENGINE = join(REPO, 'bin/svc-engine');
const megabytes = Number(process.argv[2] ?? 100);
const rounds = Number(process.argv[3] ?? 3);

const seconds = async (work: () => unknown): Promise<number> => {
  const t0 = performance.now();
  await work();
  return (performance.now() - t0) / 1000;
};
const engine = (...args: string[]) => {
  const r = spawnSync(ENGINE, [...args, '--json'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`engine ${args[0]}: ${r.stdout}${r.stderr}`);
};
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const line = (name: string, s: number, base: number, target: string) =>
  console.log(`${name.padEnd(44)} ${s.toFixed(3)} s   ratio ${(s / base).toFixed(2)} (target ${target})`);

/** One more row, so the next relocation takes a snapshot first (the data changed). */
async function touch(api: Api, projectId: string, n: number): Promise<void> {
  await api.call('POST', `/v0/projects/${projectId}/wakeup`);
  const { endpoint } = await api.call('GET', `/v0/projects/${projectId}/head`);
  await engineSql(endpoint.address, `INSERT INTO t VALUES (randomblob(${16 + n}))`);
  await api.call('POST', `/v0/projects/${projectId}/sleep`);
}

async function main(stack: Stack, work: string): Promise<void> {
  const api = await apiOf(stack);
  const db = createDb(stack.settings);
  const rootOf = async (projectId: string) => {
    const owner = (await getProject(db, projectId))!.agent_id;
    return stack.agents.find((a) => a.id === owner)!.root;
  };
  const { id } = await bigSnapshot(api, megabytes);
  console.log(`tenant of ${megabytes} MiB (${rounds} rounds, interleaved)`);

  // Relocation vs. backup + copy + restore.
  const reloc = { service: [] as number[], base: [] as number[] };
  for (let round = 0; round < rounds; round++) {
    await touch(api, id, round);
    const dataDir = join(await rootOf(id), 'tenants', id, 'data');
    const b = join(work, `b-${round}`);
    reloc.base.push(
      await seconds(() => {
        engine('backup', '--data-dir', dataDir, '--out', join(b, 'backup'));
        cpSync(join(b, 'backup'), join(b, 'copy'), { recursive: true });
        engine('restore', '--backup', join(b, 'copy'), '--target', join(b, 'restored'));
      }),
    );
    rmSync(b, { recursive: true, force: true });
    reloc.service.push(await seconds(() => api.call('POST', `/v0/projects/${id}/relocate`, {})));
  }
  const relocBase = median(reloc.base);
  console.log(`baseline: engine backup + copy + engine restore   ${relocBase.toFixed(3)} s`);
  line('relocation (POST …/relocate)', median(reloc.service), relocBase, '≤ 1.5');

  // Fork vs. a copy of its backup directory.
  const fork = { service: [] as number[], base: [] as number[], restore: [] as number[] };
  for (let round = 0; round < rounds; round++) {
    const snap = await api.call('POST', `/v0/projects/${id}/snapshots`, { label: `fork-${round}` });
    const backupDir = join(await rootOf(id), 'snapshots', id, snap.id);
    fork.base.push(await seconds(() => cpSync(backupDir, join(work, `fork-copy-${round}`), { recursive: true })));
    rmSync(join(work, `fork-copy-${round}`), { recursive: true, force: true });
    // The floor of any fork through the engine contract: the engine's restore of that backup, alone.
    fork.restore.push(await seconds(() => engine('restore', '--backup', backupDir, '--target', join(work, `fork-restore-${round}`))));
    rmSync(join(work, `fork-restore-${round}`), { recursive: true, force: true });
    let forked = '';
    fork.service.push(await seconds(async () => (forked = (await api.call('POST', '/v0/projects', { name: `fork-${round}`, from_snapshot: snap.id })).id)));
    await api.call('DELETE', `/v0/projects/${forked}`);
  }
  const forkBase = median(fork.base);
  console.log(`baseline: copy of the backup directory             ${forkBase.toFixed(3)} s`);
  line('fork (POST /v0/projects from_snapshot)', median(fork.service), forkBase, '≤ 1.5');
  line('floor: engine restore of the backup, alone', median(fork.restore), forkBase, 'the ceiling: a fork restores through the engine');
  console.log(`fork over its floor (engine restore alone): ${(median(fork.service) / median(fork.restore)).toFixed(2)}`);

  await lossRounds(stack, api, id, work);
  await benchArchive(stack, { megabytes, rounds });
}

/** Agent loss: the project on agent 1 with a fresh off-machine copy; agent 1 killed; declared lost; timed until restored on agent 0. */
async function lossRounds(stack: Stack, api: Api, id: string, work: string): Promise<void> {
  const db = createDb(stack.settings);
  const calls = createAgentClient(stack.settings.SVCD_INTERNAL_SECRET);
  const loss = { service: [] as number[], base: [] as number[] };
  let recoveryPointS = 0;
  for (let round = 0; round < rounds; round++) {
    const lostAgent = stack.agents[1]!;
    if ((await getProject(db, id))!.agent_id !== lostAgent.id) await api.call('POST', `/v0/projects/${id}/relocate`, { target_agent: lostAgent.id });
    await touch(api, id, 100 + round);
    const snap = await api.call('POST', `/v0/projects/${id}/snapshots`, { label: `drill-${round}` });
    for (let i = 0; i < 600 && (await api.call('GET', `/v0/projects/${id}/snapshots/${snap.id}`)).offsite.state !== 'complete'; i++) await pause(100);
    const stored = join(stack.env.SVCD_BACKUP_DIR!, id, snap.id);
    const b = join(work, `loss-${round}`);
    loss.base.push(
      await seconds(() => {
        cpSync(stored, join(b, 'copy'), { recursive: true });
        engine('restore', '--backup', join(b, 'copy'), '--target', join(b, 'restored'));
      }),
    );
    rmSync(b, { recursive: true, force: true });
    lostAgent.process.kill('SIGKILL');
    await pause(Number(stack.env.SVCD_AGENT_LOST_AFTER_S) * 1000 + 600);
    loss.service.push(
      await seconds(async () => {
        const r = await calls.fetch({ agent_id: 'bench', internal_url: stack.agents[0]!.internalUrl }, 'POST', internalPaths.agentLost(lostAgent.id));
        const text = await r.text();
        if (!text.includes('"moved":1')) throw new Error(`recovery: ${text}`);
      }),
    );
    const back = await api.call('GET', `/v0/projects/${id}`);
    recoveryPointS = (Date.now() - Date.parse(back.last_backup_at ?? back.restored_from.snapshot_created_at)) / 1000;
    await stack.restartAgent(1);
    for (let i = 0; i < 300 && (await getAgent(db, lostAgent.id))?.status !== undefined; i++) await pause(100);
  }
  const base = median(loss.base);
  console.log(`baseline: copy of the off-machine copy + engine restore ${base.toFixed(3)} s`);
  line('restore after agent loss (declare → restored)', median(loss.service), base, '≤ 1.5');
  console.log(`recovery point when the drill ended: the newest off-machine copy was ${recoveryPointS.toFixed(1)} s old`);
}

const dir = mkdtempSync(join(tmpdir(), 'svc-bench-durability-'));
const stack = await startStack({
  dir,
  agents: 2,
  env: {
    SVCD_PORT: '0',
    SVCD_AGENT_PORT: '0',
    SVCD_DATAPLANE_PORT: '0',
    SVCD_METRICS_PORT: '0',
    SVCD_HEARTBEAT_MS: '300',
    SVCD_AGENT_STALE_MS: '1500',
    SVCD_AGENT_LOST_AFTER_S: '2',
  },
  agentOutput: 'collect',
  log: () => {},
});
const work = mkdtempSync(join(dir, 'bench-'));
try {
  await main(stack, work);
} finally {
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
}
