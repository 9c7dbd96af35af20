/**
 * Conditional requests on objects (RFC 9110 §13): entity tags and HTTP dates as their headers carry
 * them, and what each precondition answers of a catalog row. Plain values only; the PUT's
 * preconditions are made atomic by the catalog flip's own DynamoDB condition (shared/db/storage.ts),
 * a failed one answers 409 `conflict` rather than 412 (docs/storage.md "Conditional requests").
 */
import type { EtagCondition, ObjectRecord, PutPrecondition } from '../../../shared/db/storage.ts';
import { errors } from '../../../shared/errors.ts';

/** One entity tag of a header (RFC 9110 §8.8.3): its opaque value and whether it is weak. */
export interface EntityTag {
  weak: boolean;
  opaque: string;
}

/** At most this many entity tags in one `If-Match` or `If-None-Match` of a PUT. */
export const MAX_ETAGS = 50;

/** etagc: `!`, `#`-`~` and obs-text (RFC 9110 §8.8.3). */
const ENTITY_TAG = /^\s*(W\/)?"([\x21\x23-\x7e\x80-\xff]*)"\s*$/;

/**
 * Parses `*` or a comma-separated list of entity tags (RFC 9110 §13.1.1); null when the value is
 * not one of those forms.
 */
export function parseEtagList(header: string): '*' | EntityTag[] | null {
  if (header.trim() === '*') return '*';
  const tags: EntityTag[] = [];
  // A comma cannot occur inside an entity tag's opaque part, so splitting on it is exact.
  for (const member of header.split(',')) {
    if (member.trim() === '') continue; // empty list elements are allowed (RFC 9110 §5.6.1)
    const m = ENTITY_TAG.exec(member);
    if (!m) return null;
    tags.push({ weak: m[1] !== undefined, opaque: m[2]! });
  }
  return tags.length > 0 ? tags : null;
}

/** True when an `If-None-Match` value matches `etag` (weak comparison, `*` matches any); lenient as on a GET. */
export function noneMatch(header: string | null, etag: string): boolean {
  if (header === null) return false;
  const tags = parseEtagList(header);
  if (tags === null) return false;
  return tags === '*' || tags.some((t) => t.opaque === etag);
}

/**
 * The preconditions of a PUT, from its `If-Match` and `If-None-Match` headers (null: absent). A
 * malformed value is 400: a client that meant a condition must not have its write go through
 * unconditionally. Weak tags can never satisfy `If-Match` (strong comparison, RFC 9110 §13.1.1),
 * so they are dropped from it; `If-None-Match` compares weakly (§13.1.2).
 */
export function putPrecondition(ifMatch: string | null, ifNoneMatch: string | null): PutPrecondition {
  const parse = (header: string | null, name: string, weakCounts: boolean): EtagCondition | null => {
    if (header === null) return null;
    const tags = parseEtagList(header);
    if (tags === null) throw errors.invalid(`${name}: must be * or a list of quoted entity tags`);
    if (tags === '*') return '*';
    if (tags.length > MAX_ETAGS) throw errors.invalid(`${name}: must list at most ${MAX_ETAGS} entity tags`);
    return tags.filter((t) => weakCounts || !t.weak).map((t) => t.opaque);
  };
  return { ifMatch: parse(ifMatch, 'if-match', false), ifNoneMatch: parse(ifNoneMatch, 'if-none-match', true) };
}

/** True when the PUT carries a precondition. */
export function isConditional(pre: PutPrecondition): boolean {
  return pre.ifMatch !== null || pre.ifNoneMatch !== null;
}

/**
 * Why `pre` does not hold of the row as read (null: it holds). A pending row has no bytes yet, so
 * no current representation: `If-Match` fails on it and `If-None-Match: *` holds (RFC 9110 §13.1.1-2).
 */
export function preconditionFailure(pre: PutPrecondition, row: ObjectRecord | null, bucket: string, key: string): string | null {
  const stored = row !== null && row.state === 'stored' && row.blob !== null ? row : null;
  if (pre.ifMatch !== null) {
    if (!stored) return `precondition failed: object ${bucket}/${key} has no stored bytes (If-Match)`;
    if (pre.ifMatch !== '*' && !pre.ifMatch.includes(stored.etag)) return `precondition failed: object ${bucket}/${key} has another ETag (If-Match)`;
  }
  if (pre.ifNoneMatch !== null && stored) {
    if (pre.ifNoneMatch === '*') return `precondition failed: object ${bucket}/${key} already exists (If-None-Match: *)`;
    if (pre.ifNoneMatch.includes(stored.etag)) return `precondition failed: object ${bucket}/${key} has a listed ETag (If-None-Match)`;
  }
  return null;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const IMF_FIXDATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const RFC850_DATE = /^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\d{2})-([A-Z][a-z]{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const ASCTIME_DATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/;

/** The fields of an HTTP-date as one of its forms matched them. */
interface DateParts {
  day: number;
  month: string;
  year: number;
  time: [number, number, number];
}

function partsOf(text: string): DateParts | null {
  const time = (h: string, m: string, s: string): [number, number, number] => [Number(h), Number(m), Number(s)];
  let m = IMF_FIXDATE.exec(text);
  if (m) return { day: Number(m[1]), month: m[2]!, year: Number(m[3]), time: time(m[4]!, m[5]!, m[6]!) };
  if ((m = RFC850_DATE.exec(text))) {
    // A two-digit year more than 50 years in the future is in the past century (RFC 9110 §5.6.7).
    const yy = Number(m[3]);
    const year = 2000 + yy > new Date().getUTCFullYear() + 50 ? 1900 + yy : 2000 + yy;
    return { day: Number(m[1]), month: m[2]!, year, time: time(m[4]!, m[5]!, m[6]!) };
  }
  if ((m = ASCTIME_DATE.exec(text))) return { day: Number(m[2]!.trim()), month: m[1]!, year: Number(m[6]), time: time(m[3]!, m[4]!, m[5]!) };
  return null;
}

/**
 * Parses an HTTP-date (RFC 9110 §5.6.7: IMF-fixdate, and the obsolete RFC 850 and asctime forms a
 * recipient must accept) into milliseconds; null when it is none of them or names no real time.
 */
export function parseHttpDate(value: string): number | null {
  const parts = partsOf(value.trim());
  if (!parts) return null;
  const month = MONTHS.indexOf(parts.month);
  const [hh, mm, ss] = parts.time;
  if (month < 0 || hh > 23 || mm > 59 || ss > 60) return null;
  const ms = Date.UTC(parts.year, month, parts.day, hh, mm, ss);
  // A day the month does not have (31 Feb) would roll over into the next: not a date.
  if (new Date(ms).getUTCDate() !== parts.day) return null;
  return ms;
}

/** A row's `Last-Modified` in whole seconds (an HTTP-date has no finer precision). */
function lastModifiedSeconds(row: ObjectRecord): number {
  return Math.floor(Date.parse(row.updated_at) / 1000);
}

/**
 * True when a GET or HEAD answers 304 (RFC 9110 §13.2.2 steps 3 and 4): `If-None-Match` matches,
 * or, only when there is no `If-None-Match`, the object was not modified after `If-Modified-Since`.
 * An `If-Modified-Since` that is not an HTTP-date is ignored (§13.1.3).
 */
export function notModified(ifNoneMatch: string | null, ifModifiedSince: string | null, row: ObjectRecord): boolean {
  if (ifNoneMatch !== null) return noneMatch(ifNoneMatch, row.etag);
  if (ifModifiedSince === null) return false;
  const since = parseHttpDate(ifModifiedSince);
  return since !== null && lastModifiedSeconds(row) <= Math.floor(since / 1000);
}

/**
 * True when an `If-Range` lets a `Range` apply (RFC 9110 §13.1.5): an entity tag that matches
 * strongly (a weak one never does), or an HTTP-date equal to the object's `Last-Modified`. Anything
 * else (another tag, another date, a malformed value) answers the whole object.
 */
export function rangeApplies(ifRange: string | null, row: ObjectRecord): boolean {
  if (ifRange === null) return true;
  const text = ifRange.trim();
  if (text.startsWith('"') || text.startsWith('W/')) {
    const m = ENTITY_TAG.exec(text);
    return m !== null && m[1] === undefined && m[2] === row.etag;
  }
  const date = parseHttpDate(text);
  return date !== null && Math.floor(date / 1000) === lastModifiedSeconds(row);
}
