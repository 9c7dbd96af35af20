import { describe, expect, it } from 'vitest';
import { SnapshotHolds } from './holds.ts';

const P = 'prj_0000000000000001';
const Q = 'prj_0000000000000002';
const A = 'snap_0000000000000a0a';
const B = 'snap_0000000000000b0b';

describe('SnapshotHolds', () => {
  it('holds a snapshot of one project until every hold on it is released', () => {
    const holds = new SnapshotHolds();
    const first = holds.hold(P, A);
    const second = holds.hold(P, A);
    expect(holds.held(P, A)).toBe(true);
    expect(holds.held(P, B)).toBe(false);
    expect(holds.held(Q, A)).toBe(false);
    first();
    expect(holds.held(P, A)).toBe(true);
    second();
    expect(holds.held(P, A)).toBe(false);
    expect(holds.busy(P)).toBe(false);
  });

  it('a release called twice releases once', () => {
    const holds = new SnapshotHolds();
    const release = holds.hold(P, A);
    holds.hold(P, A);
    release();
    release();
    expect(holds.held(P, A)).toBe(true);
  });

  it('a project is busy while any of its snapshots is held', () => {
    const holds = new SnapshotHolds();
    const release = holds.hold(P, B);
    expect(holds.busy(P)).toBe(true);
    expect(holds.busy(Q)).toBe(false);
    release();
    expect(holds.busy(P)).toBe(false);
  });
});
