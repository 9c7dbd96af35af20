/** The object path a ticket names, on plain values. */
import { describe, expect, it } from 'vitest';
import { objectPath } from './tickets.ts';

describe('objectPath', () => {
  const base = '/v0/projects/prj_0123456789abcdef/storage/objects/b1';

  it('percent-encodes each segment and keeps `/`', () => {
    expect(objectPath('prj_0123456789abcdef', 'b1', 'dir/a b?#%.txt')).toBe(`${base}/dir/a%20b%3F%23%25.txt`);
    expect(objectPath('prj_0123456789abcdef', 'b1', 'été/日')).toBe(`${base}/${encodeURIComponent('été')}/${encodeURIComponent('日')}`);
  });

  it('encodes `/` too when a segment is `.` or `..`, so clients cannot collapse it', () => {
    expect(objectPath('prj_0123456789abcdef', 'b1', 'a/../b')).toBe(`${base}/a%2F..%2Fb`);
    expect(objectPath('prj_0123456789abcdef', 'b1', './x')).toBe(`${base}/.%2Fx`);
  });
});
