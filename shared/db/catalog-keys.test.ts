/**
 * The object catalog's sort keys: every legal key fits DynamoDB's 1024-byte sort key, and the
 * encoding orders like the keys themselves (property-checked). Listing them from DynamoDB is
 * test/integration/storage-catalog.test.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { catalogKeyPart, compareKeys, KEY_PART_BUDGET, keyPartCeiling, keyPartFloor, prefixSuccessor } from './catalog-keys.ts';

const utf8 = (s: string) => Buffer.from(s, 'utf8');
const sign = (n: number) => (n < 0 ? -1 : n > 0 ? 1 : 0);

// Characters at every UTF-8 width boundary, and the extremes.
const chars = ['\u0001', 'a', 'z', '\u007f', '\u0080', 'é', '\u07ff', '\u0800', '日', '\uffff', '\u{10000}', '😀', '\u{10ffff}'];
// Prefixes that stop 0, 1, 2 or 3 bytes short of the budget, and some that cross it.
const prefixes = [
  'a'.repeat(KEY_PART_BUDGET - 3),
  'a'.repeat(KEY_PART_BUDGET - 2),
  'a'.repeat(KEY_PART_BUDGET - 1),
  'a'.repeat(KEY_PART_BUDGET),
  'é'.repeat(461), // 922 bytes
  '日'.repeat(307), // 921 bytes
  '😀'.repeat(230), // 920 bytes
  'x'.repeat(600) + '😀'.repeat(80),
  '',
];
const keyArb = fc
  .tuple(fc.constantFrom(...prefixes), fc.array(fc.constantFrom(...chars), { maxLength: 12 }))
  .map(([p, tail]) => p + tail.join(''))
  .filter((k) => k.length > 0 && [...k].length <= 1024);

describe('catalog sort keys', () => {
  it('fit the 1024-byte sort key with the longest bucket name, for keys of up to 4 KiB of UTF-8', async () => {
    for (const key of ['x'.repeat(1024), '😀'.repeat(1024), 'é'.repeat(1024), '日'.repeat(1024), 'a'.repeat(KEY_PART_BUDGET)]) {
      const { part } = await catalogKeyPart(key);
      expect(utf8(`OBJ#${'b'.repeat(63)}#${part}`).length).toBeLessThanOrEqual(1024);
    }
  });

  it('keep keys of up to the budget verbatim', async () => {
    for (const key of ['a', 'dir/file.txt', 'a'.repeat(KEY_PART_BUDGET), 'é'.repeat(461)]) {
      expect(await catalogKeyPart(key)).toEqual({ part: key, group: null });
    }
  });

  it('order like the keys themselves, except within one group of long keys', async () => {
    await fc.assert(
      fc.asyncProperty(keyArb, keyArb, async (a, b) => {
        const pa = await catalogKeyPart(a);
        const pb = await catalogKeyPart(b);
        expect(utf8(pa.part).length).toBeLessThanOrEqual(KEY_PART_BUDGET + 1 + 32);
        if (a === b) {
          expect(pa.part).toBe(pb.part);
        } else {
          expect(pa.part).not.toBe(pb.part);
          const sameGroup = pa.group !== null && pa.group === pb.group;
          if (!sameGroup) expect(sign(Buffer.compare(utf8(pa.part), utf8(pb.part)))).toBe(sign(compareKeys(a, b)));
        }
      }),
      { numRuns: 3000 },
    );
  });

  it('compareKeys is code point order, which is UTF-8 byte order', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 8 }), fc.string({ unit: 'grapheme', maxLength: 8 }), (a, b) => {
        expect(sign(compareKeys(a, b))).toBe(sign(Buffer.compare(utf8(a), utf8(b))));
      }),
      { numRuns: 2000 },
    );
  });

  it('bound a scan: a key at or after another has its part at or after that one\'s floor; at or before, at or before its ceiling', async () => {
    await fc.assert(
      fc.asyncProperty(keyArb, keyArb, async (a, b) => {
        const [lo, hi] = compareKeys(a, b) <= 0 ? [a, b] : [b, a];
        const partLo = (await catalogKeyPart(lo)).part;
        const partHi = (await catalogKeyPart(hi)).part;
        expect(compareKeys(await keyPartFloor(lo), partHi)).toBeLessThanOrEqual(0);
        expect(compareKeys(partLo, await keyPartCeiling(hi))).toBeLessThanOrEqual(0);
      }),
      { numRuns: 3000 },
    );
  });
});

describe('prefixSuccessor', () => {
  it('sorts after every string with the prefix and at or before every other string after the prefix', () => {
    const unit = fc.constantFrom('a', 'b', '/', '\u0000', '\ud7ff', '\ue000', '\uffff', '\u{10000}', '\u{10ffff}');
    const text = fc.array(unit, { maxLength: 5 }).map((a) => a.join(''));
    fc.assert(
      fc.property(text.filter((p) => p.length > 0), text, (prefix, other) => {
        const next = prefixSuccessor(prefix);
        const withPrefix = prefix + other;
        if (next === null) {
          expect([...prefix].every((c) => c === '\u{10ffff}')).toBe(true);
          return;
        }
        expect(compareKeys(withPrefix, next)).toBeLessThan(0);
        if (!other.startsWith(prefix) && compareKeys(other, prefix) > 0) expect(compareKeys(next, other)).toBeLessThanOrEqual(0);
      }),
      { numRuns: 3000 },
    );
  });

  it('raises the last code point past the surrogates and drops trailing U+10FFFF', () => {
    expect(prefixSuccessor('a/')).toBe('a0');
    expect(prefixSuccessor('x\ud7ff')).toBe('x\ue000');
    expect(prefixSuccessor('a\u{10ffff}\u{10ffff}')).toBe('b');
    expect(prefixSuccessor('\u{10ffff}')).toBeNull();
  });
});
