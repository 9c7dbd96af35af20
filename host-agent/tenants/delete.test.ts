/**
 * What a project's deletion removes on the agent's machine, that a caller gone before the commit
 * point leaves the project whole, and how a failed finish is retried (docs/lifecycle.md "Deleting a
 * project").
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { tempDir } from '../../test/helpers/env.ts';
import type { Db } from '../../shared/db/client.ts';
import type { ProjectRecord } from '../../shared/db/projects.ts';
import { finishInBackground, markDeleting, projectPaths, type DeletionDeps } from './delete.ts';
import { layoutOf } from './layout.ts';

const P = 'prj_00000000000000aa';
const OTHER = 'prj_00000000000000bb';

describe('projectPaths', () => {
  it('names <area>/<project> in every area under the root, and the pid record, and nothing of another project', () => {
    const root = tempDir('svc-delete-paths-');
    try {
      const layout = layoutOf(root.dir);
      for (const area of ['tenants', 'snapshots', 'logs', 'blobs', 'functions', 'run', 'cache']) mkdirSync(join(root.dir, area), { recursive: true });
      for (const dir of [layout.dataDir(P), layout.replacedRoot(P), layout.snapshotRoot(P), layout.logDir(P), join(root.dir, 'blobs', P), join(root.dir, 'functions', P), layout.dataDir(OTHER)]) {
        mkdirSync(dir, { recursive: true });
      }
      writeFileSync(layout.runRecord(P), '{}');
      writeFileSync(layout.runRecord(OTHER), '{}');
      writeFileSync(join(root.dir, 'agent-id'), 'agt_0000000000000000');

      const paths = projectPaths(layout, P).map((p) => p.slice(root.dir.length + 1)).sort();
      expect(paths).toEqual([`blobs/${P}`, `functions/${P}`, `logs/${P}`, `run/${P}.json`, `snapshots/${P}`, `tenants/${P}`]);
      expect(projectPaths(layoutOf(join(root.dir, 'absent')), P)).toEqual([]);
    } finally {
      root.cleanup();
    }
  });
});

describe('markDeleting', () => {
  it('commits nothing once its caller has gone: 503, and not a write to the table', async () => {
    const send = vi.fn(async () => ({}));
    const deps = { db: { doc: { send }, table: 't' } as unknown as Db, settings: { SVCD_DELETED_RECEIPTS_RETENTION_DAYS: 30 }, now: () => 0, log: () => {} } as unknown as DeletionDeps;
    const at = new Date(0).toISOString();
    const project: ProjectRecord = { id: P, name: 'p', state: 'sleeping', created_at: at, updated_at: at, owner: 'acct_0000000000000000', agent_id: 'agt_0000000000000000' };
    const gone = new AbortController();
    gone.abort();
    await expect(markDeleting(deps, project, { actor: project.owner, requestId: 'req_0000000000000001', signal: gone.signal }, 'sleeping')).rejects.toMatchObject({
      code: 'orchestrator_unavailable',
    });
    expect(send).not.toHaveBeenCalled();
  });
});

describe('finishInBackground', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('runs at once, retries a failure after a growing pause, and stops at success', async () => {
    vi.useFakeTimers();
    const lines: string[] = [];
    let calls = 0;
    finishInBackground(
      async () => {
        calls++;
        if (calls < 3) throw new Error(`attempt ${calls} failed`);
      },
      (line) => lines.push(line),
      'deleting prj_x',
      () => false,
    );
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toBe(1);
    await vi.advanceTimersByTimeAsync(1000);
    expect(calls).toBe(2);
    await vi.advanceTimersByTimeAsync(1999);
    expect(calls).toBe(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toBe(3);
    await vi.advanceTimersByTimeAsync(60 * 60_000);
    expect(calls).toBe(3);
    expect(lines).toEqual([
      'agent: deleting prj_x failed: attempt 1 failed; retried in 1 s',
      'agent: deleting prj_x failed: attempt 2 failed; retried in 2 s',
    ]);
  });

  it('tries no more once the agent is closing', async () => {
    vi.useFakeTimers();
    let closed = false;
    let calls = 0;
    finishInBackground(
      async () => {
        calls++;
        throw new Error('down');
      },
      () => {},
      'deleting prj_x',
      () => closed,
      500,
    );
    await vi.advanceTimersByTimeAsync(500);
    expect(calls).toBe(1);
    closed = true;
    await vi.advanceTimersByTimeAsync(60 * 60_000);
    expect(calls).toBe(1);
  });
});
