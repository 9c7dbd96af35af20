import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tempDir } from '../../test/helpers/env.ts';
import { layoutOf, type Layout } from './layout.ts';
import { sweepStaging, sweepTempFiles } from './leftovers.ts';

const P = 'prj_0123456789abcdef';
let tmp: { dir: string; cleanup: () => void };
let layout: Layout;

function dir(path: string): string {
  mkdirSync(path, { recursive: true });
  writeFileSync(join(path, 'file'), 'x');
  return path;
}

function file(path: string): string {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, 'x');
  return path;
}

beforeEach(() => {
  tmp = tempDir('svc-leftovers-unit-');
  layout = layoutOf(tmp.dir);
  for (const d of [layout.tenants, layout.snapshots, layout.run]) mkdirSync(d, { recursive: true });
});

afterEach(() => tmp.cleanup());

describe('sweepTempFiles', () => {
  it('removes durable-write temp files and keeps the records themselves', () => {
    const gone = [file(join(layout.run, `${P}.json.tmp-42`)), file(join(layout.tenantDir(P), 'restore.json.tmp-42-0af3')), file(join(tmp.dir, 'agent-id.tmp'))];
    const kept = [file(layout.runRecord(P)), file(layout.restoreJournal(P)), file(join(tmp.dir, 'agent-id')), file(join(layout.run, 'notes.tmp'))];
    const sweep = sweepTempFiles(layout);
    for (const p of gone) expect(existsSync(p), p).toBe(false);
    for (const p of kept) expect(existsSync(p), p).toBe(true);
    expect(sweep.removed.sort()).toEqual([`run/${P}.json.tmp-42`, `tenants/${P}/restore.json.tmp-42-0af3`, 'agent-id.tmp'].sort());
  });
});

describe('sweepStaging', () => {
  it('removes init, restore and engine staging, and never data/, replaced/ or a name it does not know', () => {
    const t = layout.tenantDir(P);
    const gone = [
      dir(join(t, 'initializing-20260101T000000000Z-0a1b')),
      dir(join(t, 'initializing-20260101T000000000Z-0a1b.staging-0123456789abcdef')),
      dir(join(t, 'restoring-20260101T000000000Z-snap_0123456789abcdef')),
      dir(join(layout.unappliedRoot(P), '20260101T000000000Z-snap_0123456789abcdef')),
      dir(join(t, 'data.staging-0123456789abcdef')),
      dir(join(layout.snapshotRoot(P), 'snap_0123456789abcdef.staging-0123456789abcdef')),
    ];
    const kept = [
      dir(layout.dataDir(P)),
      dir(join(layout.replacedRoot(P), '20260101T000000000Z-snap_0123456789abcdef')),
      dir(join(t, 'something-else')),
      dir(layout.backupDir(P, 'snap_0123456789abcdef')),
    ];
    const sweep = sweepStaging(layout);
    for (const p of gone) expect(existsSync(p), p).toBe(false);
    for (const p of kept) expect(existsSync(p), p).toBe(true);
    expect(existsSync(layout.unappliedRoot(P))).toBe(false);
    expect(sweep.removed).toHaveLength(gone.length);
  });

  it('leaves a tenant’s restore staging alone while its restore journal is still there', () => {
    const t = layout.tenantDir(P);
    file(layout.restoreJournal(P));
    const fresh = dir(join(t, 'restoring-20260101T000000000Z-snap_0123456789abcdef'));
    const undone = dir(join(layout.unappliedRoot(P), '20260101T000000000Z-snap_0123456789abcdef'));
    const init = dir(join(t, 'initializing-20260101T000000000Z-0a1b'));
    sweepStaging(layout);
    expect(existsSync(fresh)).toBe(true);
    expect(existsSync(undone)).toBe(true);
    expect(existsSync(init)).toBe(false);
  });

  it('removes what a free of a previous directory left under discarding/, and keeps a receipt marker not yet written', () => {
    const root = layout.discardingRoot(P);
    const freed = dir(join(root, '20260101T000000000Z-snap_0123456789abcdef'));
    const temp = file(join(root, '20260101T000000000Z-snap_0123456789abcdef.receipt.json.tmp-42'));
    const marker = file(join(root, '20260102T000000000Z-snap_0123456789abcdef.receipt.json'));
    const sweep = sweepStaging(layout);
    expect(existsSync(freed)).toBe(false);
    expect(existsSync(temp)).toBe(false);
    expect(existsSync(marker)).toBe(true);
    expect(sweep.removed).toHaveLength(2);
  });
});
