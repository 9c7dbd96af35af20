/** Ranges of a read, on plain values (RFC 9110 §14); its conditionals are conditions.test.ts. */
import { describe, expect, it } from 'vitest';
import { resolveRange } from './read.ts';

describe('resolveRange', () => {
  it('answers the whole object without a header, for another unit, several ranges or a malformed one', () => {
    for (const header of [null, 'items=0-1', 'bytes=0-1,3-4', 'bytes=a-b', 'bytes=-', 'bytes=5-2', 'bytes 0-1']) {
      expect(resolveRange(header, 10), String(header)).toBeNull();
    }
  });

  it('clamps a range to the object and takes an open end as its last byte', () => {
    expect(resolveRange('bytes=2-5', 10)).toEqual({ start: 2, end: 5 });
    expect(resolveRange('bytes=2-', 10)).toEqual({ start: 2, end: 9 });
    expect(resolveRange('bytes=8-100', 10)).toEqual({ start: 8, end: 9 });
    expect(resolveRange(' Bytes = 0 - 0 ', 10)).toEqual({ start: 0, end: 0 });
  });

  it('answers a suffix as the last bytes, the whole object when the suffix is longer', () => {
    expect(resolveRange('bytes=-3', 10)).toEqual({ start: 7, end: 9 });
    expect(resolveRange('bytes=-30', 10)).toEqual({ start: 0, end: 9 });
  });

  it('is unsatisfiable past the end, for an empty suffix, and for any range of an empty object', () => {
    expect(resolveRange('bytes=10-', 10)).toBe('unsatisfiable');
    expect(resolveRange('bytes=10-12', 10)).toBe('unsatisfiable');
    expect(resolveRange('bytes=-0', 10)).toBe('unsatisfiable');
    expect(resolveRange('bytes=-1', 0)).toBe('unsatisfiable');
    expect(resolveRange('bytes=0-', 0)).toBe('unsatisfiable');
  });
});
