import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseOr400 } from './validation.ts';
import { invalidMessage } from '../test/helpers/invalid.ts';

const message = invalidMessage;

const body = z.strictObject({
  name: z.string(),
  count: z.number().int().min(1).max(9).optional(),
  kind: z.enum(['a', 'b']).optional(),
  tags: z.array(z.string().max(3)).max(2).optional(),
  inner: z.strictObject({ x: z.string() }).optional(),
});

describe('validation messages', () => {
  it('say what is wrong in our words, naming the field', () => {
    const cases: [unknown, string][] = [
    [{}, 'name: is required'],
    [{ name: 5 }, 'name: must be a string'],
    [{ name: 'n', count: 'x' }, 'count: must be a number'],
    [{ name: 'n', count: 1.5 }, 'count: must be a whole number'],
    [{ name: 'n', count: 0 }, 'count: must be at least 1'],
    [{ name: 'n', count: 10 }, 'count: must be at most 9'],
    [{ name: 'n', kind: 'c' }, 'kind: must be one of "a", "b"'],
    [{ name: 'n', tags: ['abcd'] }, 'tags[0]: must be at most 3 characters'],
    [{ name: 'n', tags: ['a', 'b', 'c'] }, 'tags: must have at most 2 items'],
    [{ name: 'n', inner: 5 }, 'inner: must be a JSON object'],
    [{ name: 'n', inner: {} }, 'inner.x: is required'],
    ];
    for (const [value, expected] of cases) expect(message(() => parseOr400(body, value)), JSON.stringify(value)).toBe(expected);
    // A message the schema gives is kept.
    expect(message(() => parseOr400(z.string().regex(/^a$/, 'must be a'), 'b', 'id'))).toBe('id: must be a');
  });

  it('name an unknown field before anything else: a misspelling is what to fix', () => {
    expect(message(() => parseOr400(body, { nmae: 'n' }))).toBe('nmae: is not a known field');
    expect(message(() => parseOr400(body, { name: 'n', foo: 1, bar: 2 }))).toBe('foo, bar: are not known fields');
    expect(message(() => parseOr400(body, { name: 'n', inner: { x: 'y', z: 1 } }))).toBe('inner.z: is not a known field');
  });

  it('quote an odd field name and cut a long one', () => {
    expect(message(() => parseOr400(body, { name: 'n', 'a b': 1 }))).toBe('"a b": is not a known field');
    const long = message(() => parseOr400(body, { name: 'n', ['k'.repeat(500)]: 1 }));
    expect(long.length).toBeLessThan(100);
    expect(long).toMatch(/^"k+…": is not a known field$/);
  });

  it("never pass the validator's own wording on", () => {
    const loose = z.strictObject({ n: z.coerce.number(), s: z.string().refine(() => false), u: z.union([z.string(), z.number()]) });
    for (const value of [{ n: 'abc', s: 'x', u: 'x' }, { n: 1, s: 'x', u: 'x' }, { n: 1, s: 'x', u: null }, null]) {
      const text = message(() => parseOr400(loose, value));
      expect(text).not.toMatch(/Invalid|expected|received|Unrecognized/);
      expect(text).toMatch(/^[\w.[\]"]+: /);
    }
  });
});
