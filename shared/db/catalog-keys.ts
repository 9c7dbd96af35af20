/**
 * The sort keys of catalog rows: `OBJ#<bucket>#<key part>` (shared/db/table.ts), in key order.
 *
 * ## Catalog sort keys
 * DynamoDB sort keys hold at most 1024 bytes, while an object key is up to 1024 characters, which
 * is up to 4 KiB of UTF-8. DynamoDB orders strings by their UTF-8 bytes, which is Unicode code point
 * order, the order S3 lists keys in and the one listing promises. The key part is:
 *
 * - the key itself when its UTF-8 fits `KEY_PART_BUDGET` (923) bytes: every ASCII key up to 923
 *   characters, so nearly every real key, sorts by DynamoDB alone;
 * - otherwise `T + X + h`: `T` is the longest code-point prefix of the key within the budget,
 *   `X` is the smallest code point whose UTF-8 is one byte longer than the budget has left
 *   (U+0001, U+0080, U+0800 or U+10000), and `h` is 32 hex of the key's SHA-256, for uniqueness.
 *
 * Every long key whose first code point beyond `T` did not fit is larger than every code point that
 * would have fit, and `X` is exactly the first of those larger code points: so `T + X` sorts after
 * every key that continues `T` within the budget and before every key with a larger prefix. Keys
 * sharing one `T + X` (a "group") sort among themselves by hash, not by key; they are adjacent, and
 * listing reads a whole group and orders it in memory. With the budget at 923 bytes the sort key is
 * at most `OBJ#` + 63 + `#` + 923 + 1 + 32 = 1023 bytes. Point reads compute the same sort key.
 */
import { keys, prefixes } from './table.ts';

/** UTF-8 bytes of an object key stored verbatim in its sort key. */
export const KEY_PART_BUDGET = 923;
const HASH_HEX = 32;
/** `X` by the number of budget bytes left: the smallest code point with one UTF-8 byte more. */
const GROUP_MARKERS = ['\u0001', '\u0080', '\u0800', '\u{10000}'] as const;

function utf8Bytes(codePoint: number): number {
  return codePoint < 0x80 ? 1 : codePoint < 0x800 ? 2 : codePoint < 0x10000 ? 3 : 4;
}

/** Compares keys in Unicode code point order (= UTF-8 byte order = DynamoDB's and S3's order). */
export function compareKeys(a: string, b: string): number {
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const ca = a.codePointAt(i)!;
    const cb = b.codePointAt(j)!;
    if (ca !== cb) return ca < cb ? -1 : 1;
    i += ca > 0xffff ? 2 : 1;
    j += cb > 0xffff ? 2 : 1;
  }
  const restA = a.length - i;
  const restB = b.length - j;
  return restA === restB ? 0 : restA < restB ? -1 : 1;
}

async function keyHash(key: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(key)));
  let out = '';
  for (const b of digest) out += b.toString(16).padStart(2, '0');
  return out.slice(0, HASH_HEX);
}

/**
 * The key part of an object's sort key, and for a long key its group (the key part without the
 * hash). See "Catalog sort keys" above.
 */
export async function catalogKeyPart(key: string): Promise<{ part: string; group: string | null }> {
  let used = 0;
  let prefix = '';
  for (const ch of key) {
    const n = utf8Bytes(ch.codePointAt(0)!);
    if (used + n > KEY_PART_BUDGET) {
      const group = prefix + GROUP_MARKERS[KEY_PART_BUDGET - used]!;
      return { part: group + (await keyHash(key)), group };
    }
    used += n;
    prefix += ch;
  }
  return { part: key, group: null };
}

/** The sort-key prefix of every row of `bucket`. */
export function objectPrefix(bucket: string): string {
  return `${prefixes.object}${bucket}#`;
}

/** The table key of the row of `bucket/key`, and for a long key its group's sort-key prefix. */
export async function objectKeyOf(projectId: string, bucket: string, key: string): Promise<{ pk: string; sk: string; grp: string | null }> {
  const { part, group } = await catalogKeyPart(key);
  const prefix = objectPrefix(bucket);
  return { ...keys.objectsOf(projectId), sk: prefix + part, grp: group === null ? null : prefix + group };
}

/** Past every member of a group: members are the group + hex, and `~` sorts after every hex digit. */
export const AFTER_GROUP = '~';

/**
 * A key part at or before the part of every key that sorts at or after `key` (its own part, or for a
 * long key the start of its group): where a scan of keys from `key` on may start.
 */
export async function keyPartFloor(key: string): Promise<string> {
  const { part, group } = await catalogKeyPart(key);
  return group ?? part;
}

/**
 * A key part at or after the part of every key that sorts at or before `key` (its own part, or for a
 * long key past its whole group): where a scan of keys up to `key` may stop.
 */
export async function keyPartCeiling(key: string): Promise<string> {
  const { part, group } = await catalogKeyPart(key);
  return group === null ? part : group + AFTER_GROUP;
}

/**
 * The smallest string that sorts after every string starting with `prefix` (its last code point
 * raised by one, past the surrogates; trailing U+10FFFF dropped first), or null when none does.
 */
export function prefixSuccessor(prefix: string): string | null {
  const points = Array.from(prefix, (c) => c.codePointAt(0)!);
  while (points.length > 0 && points[points.length - 1] === 0x10ffff) points.pop();
  if (points.length === 0) return null;
  let last = points.pop()! + 1;
  if (last >= 0xd800 && last <= 0xdfff) last = 0xe000;
  return String.fromCodePoint(...points, last);
}

/**
 * The sort key of a blob-deletion record: a blob whose row a bucket deletion removed, kept until the
 * blob itself is gone (docs/storage.md "Deleting a bucket"). `BLOBDEL#<bucket>#<blob name>`.
 */
export function blobDeletionKey(projectId: string, bucket: string, blob: string): { pk: string; sk: string } {
  return { ...keys.objectsOf(projectId), sk: blobDeletionPrefix(bucket) + blob };
}

/** The sort-key prefix of the blob-deletion records of `bucket`. */
export function blobDeletionPrefix(bucket: string): string {
  return `${prefixes.blobDeletion}${bucket}#`;
}
