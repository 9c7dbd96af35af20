/**
 * Previous data directories (docs/lifecycle.md "Previous data directories"): names, sizes, the
 * newest-first pages, and freeing one with its receipt, including what the agent's start finishes
 * after a crash on either side of the rename. Real directories and the run's DynamoDB Local.
 */
import { existsSync, mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Db } from '../../shared/db/client.ts';
import { listReceipts, newReceipt } from '../../shared/db/receipts.ts';
import { ServiceError } from '../../shared/errors.ts';
import { newId } from '../../shared/ids.ts';
import { tempDir, testDeployment } from '../../test/helpers/env.ts';
import { writeJsonDurable } from './files.ts';
import { layoutOf, type Layout } from './layout.ts';
import { sweepStaging } from './leftovers.ts';
import { TenantLogs } from './logs.ts';
import { DISCARD_MARKER_SUFFIX, discardReplaced, listReplaced, parseReplacedName, repairDiscards, replacedEntry, treeBytes, type ReplacedDeps } from './replaced.ts';

const SNAP_A = 'snap_0190000000000a0a';
const SNAP_B = 'snap_0190000000000b0b';
const ACTOR = 'acct_00000000000000aa';
let db: Db;
let tmp: { dir: string; cleanup: () => void };
let layout: Layout;
let deps: ReplacedDeps;
let project: string;
const logged: string[] = [];

beforeAll(async () => {
  ({ db } = await testDeployment());
});

beforeEach(() => {
  tmp = tempDir('svc-replaced-unit-');
  layout = layoutOf(tmp.dir);
  project = newId('prj');
  deps = { db, layout, logs: new TenantLogs(layout, 1 << 20), now: Date.now, log: (line) => logged.push(line) };
});

afterEach(() => tmp.cleanup());

/** A previous directory `name` holding files of the given sizes (one of them one level down). */
function previous(name: string, sizes: number[] = [10]): string {
  const dir = join(layout.replacedRoot(project), name);
  mkdirSync(join(dir, 'sub'), { recursive: true });
  sizes.forEach((size, i) => writeFileSync(join(dir, i % 2 ? 'sub' : '', `f${i}`), Buffer.alloc(size)));
  return dir;
}

async function receiptsOf(projectId: string) {
  return (await listReceipts(db, projectId, 100)).items;
}

describe('names', () => {
  it('a name restore makes says when it moved and which snapshot replaced it', () => {
    expect(parseReplacedName(`20261122T004112123Z-${SNAP_A}`)).toEqual({ movedAt: '2026-11-22T00:41:12.123Z', snapshotId: SNAP_A });
  });

  it('any other name says nothing, and an impossible date is not a time', () => {
    for (const name of ['manual-copy', `20261122T004112123Z-snap_x`, `20261399T004112123Z-${SNAP_A}`, `${SNAP_A}`]) {
      expect(parseReplacedName(name), name).toBeNull();
    }
  });
});

describe('treeBytes', () => {
  it('adds the sizes of the files at every depth and follows no symbolic link', async () => {
    const dir = previous('x', [100, 20, 3]);
    symlinkSync('/etc/passwd', join(dir, 'link'));
    expect(await treeBytes(dir)).toBe(123);
    expect(await treeBytes(join(tmp.dir, 'absent'))).toBe(0);
  });
});

describe('listReplaced', () => {
  it('lists nothing for a tenant that never restored', async () => {
    expect(await listReplaced(layout, project, 10)).toEqual({ items: [], next: null });
  });

  it('answers newest first, each with its time, snapshot, path and bytes, one page at a time', async () => {
    const names = [`20260101T000000000Z-${SNAP_A}`, `20260102T000000000Z-${SNAP_B}`, `20260103T000000000Z-${SNAP_A}`];
    names.forEach((name, i) => previous(name, [i + 1, 1000]));
    const first = await listReplaced(layout, project, 2);
    expect(first.items).toEqual([
      { name: names[2], path: join(layout.replacedRoot(project), names[2]!), moved_at: '2026-01-03T00:00:00.000Z', snapshot_id: SNAP_A, bytes: 1003 },
      { name: names[1], path: join(layout.replacedRoot(project), names[1]!), moved_at: '2026-01-02T00:00:00.000Z', snapshot_id: SNAP_B, bytes: 1002 },
    ]);
    expect(first.next).toBe(names[1]);
    const second = await listReplaced(layout, project, 2, first.next!);
    expect(second.items.map((e) => e.name)).toEqual([names[0]]);
    expect(second.next).toBeNull();
  });

  it('a full last page leads nowhere, and files or unsafe names under replaced/ are not listed', async () => {
    previous(`20260101T000000000Z-${SNAP_A}`);
    mkdirSync(join(layout.replacedRoot(project), '.hidden'));
    writeFileSync(join(layout.replacedRoot(project), '0-a-file'), 'x');
    const page = await listReplaced(layout, project, 1);
    expect(page.items).toHaveLength(1);
    expect(page.next).toBeNull();
  });

  it('a directory by another name is listed with no snapshot and the time it changed', async () => {
    const dir = previous('moved-by-hand');
    const entry = await replacedEntry(layout, project, 'moved-by-hand');
    expect(entry).toMatchObject({ name: 'moved-by-hand', path: dir, snapshot_id: null, bytes: 10 });
    expect(Math.abs(Date.parse(entry!.moved_at) - Date.now())).toBeLessThan(60_000);
  });
});

describe('discardReplaced', () => {
  it('frees the directory, answers it as it was, and writes one receipt', async () => {
    const name = `20260101T000000000Z-${SNAP_A}`;
    const dir = previous(name, [4096, 512]);
    const freed = await discardReplaced(deps, project, name, { actor: ACTOR, requestId: 'req_0000000000000001' });
    expect(freed).toMatchObject({ name, path: dir, snapshot_id: SNAP_A, bytes: 4608 });
    expect(existsSync(dir)).toBe(false);
    expect(existsSync(join(layout.discardingRoot(project), name))).toBe(false);
    expect(existsSync(join(layout.discardingRoot(project), `${name}${DISCARD_MARKER_SUFFIX}`))).toBe(false);
    expect(await receiptsOf(project)).toEqual([
      expect.objectContaining({ project, op: 'replaced.delete', target: name, actor: ACTOR, request_id: 'req_0000000000000001' }),
    ]);
  });

  it('an unknown name, a file, or a name that would leave replaced/ is 404 and touches nothing', async () => {
    writeFileSync(join(tmp.dir, 'outside'), 'x');
    mkdirSync(layout.replacedRoot(project), { recursive: true });
    writeFileSync(join(layout.replacedRoot(project), 'a-file'), 'x');
    for (const name of ['absent', 'a-file', '..', '../../../outside']) {
      const err = await discardReplaced(deps, project, name, { actor: ACTOR, requestId: 'r' }).catch((e) => e);
      expect(err, name).toBeInstanceOf(ServiceError);
      expect((err as ServiceError).code).toBe('not_found');
    }
    expect(existsSync(join(tmp.dir, 'outside'))).toBe(true);
    expect(existsSync(join(layout.replacedRoot(project), 'a-file'))).toBe(true);
    expect(await receiptsOf(project)).toEqual([]);
  });
});

describe('repairDiscards at start', () => {
  /** What a free did up to a crash: its marker, and the rename when `committed`. */
  function interrupted(name: string, committed: boolean) {
    const dir = previous(name);
    const receipt = newReceipt({ project, op: 'replaced.delete', target: name, actor: ACTOR, request_id: 'req_crash', at: new Date().toISOString() });
    mkdirSync(layout.discardingRoot(project), { recursive: true });
    writeJsonDurable(join(layout.discardingRoot(project), `${name}${DISCARD_MARKER_SUFFIX}`), receipt);
    if (committed) renameSync(dir, join(layout.discardingRoot(project), name));
    return { dir, receipt };
  }

  it('after the rename: the receipt is written once, and the sweep removes the directory', async () => {
    const name = `20260101T000000000Z-${SNAP_A}`;
    const { receipt } = interrupted(name, true);
    await repairDiscards(deps, project);
    await repairDiscards(deps, project);
    expect((await receiptsOf(project)).map((r) => r.id)).toEqual([receipt.id]);
    sweepStaging(layout);
    expect(existsSync(layout.discardingRoot(project))).toBe(false);
    expect((await listReplaced(layout, project, 10)).items).toEqual([]);
  });

  it('after the receipt too (a crash before the marker went): no second receipt', async () => {
    const name = `20260101T000000000Z-${SNAP_A}`;
    const { receipt } = interrupted(name, true);
    const { putReceipt } = await import('../../shared/db/receipts.ts');
    expect(await putReceipt(db, receipt)).toBe(true);
    await repairDiscards(deps, project);
    expect((await receiptsOf(project)).map((r) => r.id)).toEqual([receipt.id]);
  });

  it('before the rename: the marker is dropped, the directory stays listed, no receipt', async () => {
    const name = `20260101T000000000Z-${SNAP_B}`;
    const { dir } = interrupted(name, false);
    await repairDiscards(deps, project);
    sweepStaging(layout);
    expect(existsSync(dir)).toBe(true);
    expect((await listReplaced(layout, project, 10)).items.map((e) => e.name)).toEqual([name]);
    expect(await receiptsOf(project)).toEqual([]);
    expect(existsSync(layout.discardingRoot(project))).toBe(false);
  });

  it('a marker that is not a receipt of this project and name is dropped without writing anything', async () => {
    const name = `20260101T000000000Z-${SNAP_A}`;
    previous(name);
    mkdirSync(layout.discardingRoot(project), { recursive: true });
    renameSync(join(layout.replacedRoot(project), name), join(layout.discardingRoot(project), name));
    const foreign = newReceipt({ project: newId('prj'), op: 'replaced.delete', target: name, actor: ACTOR, request_id: 'r', at: new Date().toISOString() });
    writeJsonDurable(join(layout.discardingRoot(project), `${name}${DISCARD_MARKER_SUFFIX}`), foreign);
    await repairDiscards(deps, project);
    expect(await receiptsOf(project)).toEqual([]);
    expect(await receiptsOf(foreign.project)).toEqual([]);
    expect(existsSync(join(layout.discardingRoot(project), `${name}${DISCARD_MARKER_SUFFIX}`))).toBe(false);
  });
});
