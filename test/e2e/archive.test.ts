/**
 * Export and import as they ship (docs/lifecycle.md "Export and import"): the local stack (the
 * handlers in workerd, bin/svc-agent, its backup store under the state directory) and the `svc` CLI
 * (dist/client/svc.mjs) as a process, on the `fs` default and on `s3` (s3rver): `svc snapshots
 * download` writes the archive, `svc import` restores it into another project with identical rows,
 * the answers match the OpenAPI document, and the copies land in the store.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { s3TestSettings } from '../setup/s3rver.ts';
import { REPO, tempDir } from '../helpers/env.ts';
import { checkerOf } from '../helpers/openapi.ts';
import { startSuiteStack } from '../helpers/stack.ts';

const CLI = join(REPO, 'dist/client/svc.mjs');

const backends: [string, () => Record<string, string>][] = [
  ['fs', () => ({})],
  ['s3', () => s3TestSettings(inject('s3Endpoint'))],
];

describe.each(backends)('export and import on %s', (kind, settings) => {
  const dir = tempDir(`svc-archive-e2e-${kind}-`);
  const config = join(dir.dir, 'config');
  let stack: Stack;

  function svc(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string; json: any }> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [CLI, ...args, '--json'], {
        env: { PATH: process.env.PATH!, HOME: dir.dir, SVC_CONFIG_DIR: config, SVC_BASE_URL: stack.url },
        stdio: ['ignore', 'pipe', 'pipe'],
        cwd: dir.dir,
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      child.on('error', reject);
      child.on('close', (code) => {
        let json: unknown;
        for (const text of [stdout, stdout.trim().split('\n').at(-1)!]) {
          try {
            json = JSON.parse(text);
            break;
          } catch {
            json = undefined;
          }
        }
        resolve({ code, stdout, stderr, json });
      });
    });
  }
  async function ok(args: string[]): Promise<any> {
    const r = await svc(args);
    expect(r.code, `svc ${args.join(' ')}: ${r.stderr}${r.stdout}`).toBe(0);
    expect(r.json, `svc ${args.join(' ')} printed: ${r.stdout}`).toBeDefined();
    return r.json;
  }

  beforeAll(async () => {
    stack = await startSuiteStack(dir.dir, settings());
    await ok(['signup', '--name', 'Ada']);
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
    dir.cleanup();
  });

  it('downloads a snapshot with the CLI and imports it into another project: identical rows, copies off the machine', async () => {
    const source = (await ok(['projects', 'create', 'source'])).id as string;
    const target = (await ok(['projects', 'create', 'target'])).id as string;
    for (const [id, rows] of [[source, "('a'), ('b'), ('c')"], [target, "('other')"]] as const) {
      await ok(['wakeup', id]);
      await ok(['sql', id, `CREATE TABLE t (v TEXT); INSERT INTO t (v) VALUES ${rows}`]);
      await ok(['sleep', id]);
    }
    const snap = await ok(['snapshots', 'create', source, '--label', 'to export']);
    const file = join(dir.dir, 'out.tar');
    const downloaded = await ok(['snapshots', 'download', source, snap.id, '-o', file]);
    expect(downloaded).toMatchObject({ file, snapshot_id: snap.id });
    expect(statSync(file).size).toBe(downloaded.bytes);
    expect(readdirSync(dir.dir).filter((n) => n.includes('.part-'))).toEqual([]);

    // The raw answer too, against the OpenAPI document.
    const token = JSON.parse(readFileSync(join(config, 'config.json'), 'utf8')).profiles.default.token as string;
    const raw = await fetch(`${stack.url}/v0/projects/${source}/snapshots/${snap.id}/archive`, { headers: { authorization: `Bearer ${token}` } });
    expect(raw.status).toBe(200);
    expect(Number(raw.headers.get('content-length'))).toBe(downloaded.bytes);
    await raw.arrayBuffer();

    const imported = await ok(['import', target, file]);
    (await checkerOf(stack.url)).expectFits('POST', `/v0/projects/${target}/import`, 200, imported);
    expect(imported.snapshot).toMatchObject({ label: 'import', project: target });
    await ok(['wakeup', target]);
    const rows = await ok(['sql', target, 'SELECT v FROM t ORDER BY rowid']);
    expect(rows.rows.map((r: { v: string }) => r.v)).toEqual(['a', 'b', 'c']);

    // Both snapshots are copied off the machine (the local stack's store is <state dir>/backups on fs).
    for (const [id, snapshotId] of [[source, snap.id], [target, imported.snapshot.id]] as const) {
      await expect.poll(async () => (await ok(['snapshots', 'get', id, snapshotId])).offsite.state, { timeout: 20_000 }).toBe('complete');
    }
    if (kind === 'fs') expect(existsSync(join(dir.dir, 'backups', source, snap.id, 'manifest.json'))).toBe(true);
    const project = await ok(['projects', 'get', source]);
    expect(project).toMatchObject({ last_backup_at: snap.created_at, last_backup_offsite: 'complete' });
  }, 120_000);

  it('refuses a file that is not an archive (exit 1, 400)', async () => {
    const id = (await ok(['projects', 'create', 'refuses'])).id as string;
    const r = await svc(['import', id, CLI]);
    expect(r.code).toBe(1);
    expect(r.json).toMatchObject({ error: { code: 'invalid_request', status: 400 } });
  });
});
