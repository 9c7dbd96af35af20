/** Conditional requests on plain values (RFC 9110 §13): entity tags, HTTP dates, and what each precondition answers. */
import { describe, expect, it } from 'vitest';
import type { ObjectRecord } from '../../../shared/db/storage.ts';
import { ServiceError } from '../../../shared/errors.ts';
import { MAX_ETAGS, noneMatch, notModified, parseEtagList, parseHttpDate, preconditionFailure, putPrecondition, rangeApplies } from './conditions.ts';

const row = (over: Partial<ObjectRecord> = {}): ObjectRecord => ({
  id: 'obj_0000000000000001',
  project: 'prj_0000000000000001',
  bucket: 'b1',
  key: 'k',
  size: 3,
  etag: 'abc',
  content_type: 'text/plain',
  backend: 'fs',
  state: 'stored',
  created_at: '2026-05-01T12:00:00.000Z',
  updated_at: '2026-05-01T12:00:00.500Z',
  blob: 'f'.repeat(64),
  ...over,
});
const pending = row({ state: 'pending', blob: null, etag: '', size: 0 });

describe('parseEtagList', () => {
  it('reads *, strong and weak tags, lists with empty elements', () => {
    expect(parseEtagList(' * ')).toBe('*');
    expect(parseEtagList('"a", W/"b",,"c"')).toEqual([
      { weak: false, opaque: 'a' },
      { weak: true, opaque: 'b' },
      { weak: false, opaque: 'c' },
    ]);
    expect(parseEtagList('""')).toEqual([{ weak: false, opaque: '' }]);
  });

  it('refuses unquoted tags, a quote inside, * in a list, and nothing at all', () => {
    for (const bad of ['abc', '"a"b"', '"a", *', '', ' , ', 'w/"a"', '"a']) expect(parseEtagList(bad), bad).toBeNull();
  });
});

describe('noneMatch (GET)', () => {
  it('matches the quoted etag, weak or strong, in a list, and `*` matches any', () => {
    expect(noneMatch('"abc"', 'abc')).toBe(true);
    expect(noneMatch('W/"abc"', 'abc')).toBe(true);
    expect(noneMatch('"x", "abc"', 'abc')).toBe(true);
    expect(noneMatch(' * ', 'abc')).toBe(true);
  });

  it('does not match without a header, another etag, or an unquoted one', () => {
    expect(noneMatch(null, 'abc')).toBe(false);
    expect(noneMatch('"abd"', 'abc')).toBe(false);
    expect(noneMatch('abc', 'abc')).toBe(false);
  });
});

describe('putPrecondition', () => {
  it('reads both headers; If-Match drops weak tags (strong comparison), If-None-Match keeps them', () => {
    expect(putPrecondition(null, null)).toEqual({ ifMatch: null, ifNoneMatch: null });
    expect(putPrecondition('"a", W/"b"', 'W/"c", "d"')).toEqual({ ifMatch: ['a'], ifNoneMatch: ['c', 'd'] });
    expect(putPrecondition('*', '*')).toEqual({ ifMatch: '*', ifNoneMatch: '*' });
  });

  it('refuses a malformed header or too many tags with 400 naming the header', () => {
    const refusal = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return err instanceof ServiceError ? `${err.status} ${err.message}` : String(err);
      }
      return 'no refusal';
    };
    expect(refusal(() => putPrecondition('abc', null))).toMatch(/^400 if-match: /);
    expect(refusal(() => putPrecondition(null, 'W/x'))).toMatch(/^400 if-none-match: /);
    const many = Array.from({ length: MAX_ETAGS + 1 }, (_, i) => `"${i}"`).join(',');
    expect(refusal(() => putPrecondition(many, null))).toMatch(/^400 if-match: must list at most/);
  });
});

describe('preconditionFailure', () => {
  const judge = (ifMatch: string | null, ifNoneMatch: string | null, r: ObjectRecord | null) =>
    preconditionFailure(putPrecondition(ifMatch, ifNoneMatch), r, 'b1', 'k');

  it('If-None-Match: * holds while there are no bytes (no row, or a pending one) and fails once there are', () => {
    expect(judge(null, '*', null)).toBeNull();
    expect(judge(null, '*', pending)).toBeNull();
    expect(judge(null, '*', row())).toMatch(/already exists/);
  });

  it('If-Match holds only of stored bytes with a listed etag, or any stored bytes for *', () => {
    expect(judge('"abc"', null, row())).toBeNull();
    expect(judge('"x", "abc"', null, row())).toBeNull();
    expect(judge('*', null, row())).toBeNull();
    expect(judge('"x"', null, row())).toMatch(/another ETag/);
    expect(judge('W/"abc"', null, row())).toMatch(/another ETag/);
    expect(judge('*', null, null)).toMatch(/no stored bytes/);
    expect(judge('"abc"', null, pending)).toMatch(/no stored bytes/);
  });

  it('If-None-Match with tags fails when the stored etag is among them (weak comparison)', () => {
    expect(judge(null, '"x"', row())).toBeNull();
    expect(judge(null, 'W/"abc"', row())).toMatch(/listed ETag/);
    expect(judge(null, '"abc"', null)).toBeNull();
  });

  it('without headers nothing fails', () => {
    expect(judge(null, null, row())).toBeNull();
    expect(judge(null, null, null)).toBeNull();
  });
});

describe('parseHttpDate', () => {
  const at = Date.UTC(1994, 10, 6, 8, 49, 37);
  it('reads the IMF-fixdate, RFC 850 and asctime forms (RFC 9110 §5.6.7)', () => {
    expect(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT')).toBe(at);
    expect(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT')).toBe(at);
    expect(parseHttpDate('Sun Nov  6 08:49:37 1994')).toBe(at);
  });

  it('refuses anything else, and dates that do not exist', () => {
    for (const bad of ['', 'yesterday', '1994-11-06T08:49:37Z', 'Sun, 06 Nov 1994 08:49:37 UTC', 'Sun, 31 Feb 1994 08:49:37 GMT', 'Sun, 06 Nov 1994 24:00:00 GMT', 'Sun, 06 Foo 1994 08:49:37 GMT']) {
      expect(parseHttpDate(bad), bad).toBeNull();
    }
  });
});

describe('notModified (GET and HEAD)', () => {
  // The row's Last-Modified is 12:00:00 (updated_at has 500 ms more, which an HTTP-date cannot say).
  it('If-Modified-Since at or after Last-Modified is 304; before it is not', () => {
    expect(notModified(null, 'Fri, 01 May 2026 12:00:00 GMT', row())).toBe(true);
    expect(notModified(null, 'Fri, 01 May 2026 13:00:00 GMT', row())).toBe(true);
    expect(notModified(null, 'Fri, 01 May 2026 11:59:59 GMT', row())).toBe(false);
  });

  it('ignores an If-Modified-Since that is not an HTTP-date, and any when If-None-Match is present', () => {
    expect(notModified(null, 'not a date', row())).toBe(false);
    expect(notModified('"other"', 'Fri, 01 May 2026 13:00:00 GMT', row())).toBe(false);
    expect(notModified('"abc"', 'Fri, 01 May 2026 11:00:00 GMT', row())).toBe(true);
    expect(notModified(null, null, row())).toBe(false);
  });
});

describe('rangeApplies (If-Range)', () => {
  it('applies the Range without If-Range, with the strong current etag, or with the exact Last-Modified', () => {
    expect(rangeApplies(null, row())).toBe(true);
    expect(rangeApplies('"abc"', row())).toBe(true);
    expect(rangeApplies('Fri, 01 May 2026 12:00:00 GMT', row())).toBe(true);
  });

  it('answers the whole object for another etag, a weak one, another date or a malformed value', () => {
    for (const v of ['"abd"', 'W/"abc"', 'Fri, 01 May 2026 12:00:01 GMT', 'garbage', '"abc']) expect(rangeApplies(v, row()), v).toBe(false);
  });
});
