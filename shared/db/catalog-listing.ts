/**
 * Repository: listings of a bucket's catalog rows in key order (docs/storage.md "Listing"; S3's
 * ListObjectsV2 with a prefix and a delimiter). Rows are `PRJ#<prj>` / `OBJ#<bucket>#<key part>`;
 * long keys share a group sort key by hash (shared/db/catalog-keys.ts), so a group is read whole
 * and taken in key order.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { invalidCursor } from '../cursors.ts';
import type { Db } from './client.ts';
import type { Page } from './pagination.ts';
import { decodeCursor, encodeCursor, queryEach } from './pagination.ts';
import { AFTER_GROUP, compareKeys, keyPartCeiling, keyPartFloor, objectPrefix, prefixSuccessor } from './catalog-keys.ts';
import { toObject, type ObjectRecord } from './storage-records.ts';
import { keys } from './table.ts';

/** Every row of one group of long keys, in key order. */
async function groupMembers(db: Db, pk: string, grp: string): Promise<ObjectRecord[]> {
  const members: ObjectRecord[] = [];
  const query = { TableName: db.table, KeyConditionExpression: 'pk = :pk AND begins_with(sk, :grp)', ExpressionAttributeValues: { ':pk': pk, ':grp': grp }, ConsistentRead: true };
  await queryEach(db, query, (items) => void members.push(...items.map(toObject)));
  return members.sort((a, b) => compareKeys(a.key, b.key));
}

/** An entry of a bucket's listing: a row, or (with a delimiter) a common prefix standing for every key under it. */
export type CatalogEntry = { kind: 'object'; record: ObjectRecord } | { kind: 'prefix'; prefix: string };

/** What a listing of one bucket asks for. */
export interface CatalogQuery {
  limit: number;
  /** The repository's cursor (shared/db/pagination.ts) of the page before. */
  cursor?: string | undefined;
  /** Only keys that start with it (empty or absent: every key). */
  prefix?: string | undefined;
  /** Keys that hold it after the prefix are rolled up into one common prefix each (S3's `delimiter`). */
  delimiter?: string | undefined;
}

/** Where a listing resumes: past a key, or past every key under a common prefix. */
type Position = { key: string } | { under: string };

/** True when `key` comes after `after` in the listing. */
function isPast(key: string, after: Position | null): boolean {
  if (after === null) return true;
  if ('key' in after) return compareKeys(key, after.key) > 0;
  return compareKeys(key, after.under) > 0 && !key.startsWith(after.under);
}

/** The smallest key that may come after `after` (null: none can). */
function firstPast(after: Position): string | null {
  return 'key' in after ? `${after.key}\u0000` : prefixSuccessor(after.under);
}

/**
 * The position a cursor names: `k` (past that key) or `u` (past every key under that common
 * prefix). Cursors of the earlier format name a sort key (`sk`, with `k` for a long key) and still open.
 */
function positionOf(cursor: string | undefined, pk: string, skPrefix: string): Position | null {
  const resume = decodeCursor(cursor, ['pk', pk]);
  if (!resume) return null;
  if (typeof resume.u === 'string') return { under: resume.u };
  if (typeof resume.k === 'string') return { key: resume.k };
  if (typeof resume.sk === 'string' && resume.sk.startsWith(skPrefix)) return { key: resume.sk.slice(skPrefix.length) };
  throw invalidCursor();
}

/**
 * Lists a bucket in key order (pending rows included), `limit` entries at a time: the rows whose key
 * starts with `prefix`, and with a `delimiter`, each key that holds it after the prefix rolled up
 * into its common prefix (the key up to and including the delimiter), once, where it sorts (S3's
 * ListObjectsV2). A cursor names the last entry answered.
 *
 * The scan reads sort keys between two bounds (shared/db/catalog-keys.ts `keyPartFloor` and
 * `keyPartCeiling`: an over-wide range, never a narrow one) and judges every key itself; a group of
 * long keys is read whole and taken in key order. Past a common prefix it seeks beyond every key
 * under it rather than reading them.
 */
export async function listCatalog(db: Db, projectId: string, bucket: string, q: CatalogQuery): Promise<Page<CatalogEntry>> {
  const { pk } = keys.objectsOf(projectId);
  const skPrefix = objectPrefix(bucket);
  const prefix = q.prefix ?? '';
  // Never past the keys under `prefix`, nor out of the bucket (`$` follows the `#` ending skPrefix).
  const end = prefixSuccessor(prefix);
  const hiSk = end === null ? `${skPrefix.slice(0, -1)}$` : skPrefix + (await keyPartCeiling(end));
  // One more than the page tells whether another page exists.
  const scan = new CatalogScan(db, { pk, skPrefix, hiSk, prefix, delimiter: q.delimiter ? q.delimiter : null, want: q.limit + 1 }, positionOf(q.cursor, pk, skPrefix));
  await scan.run();

  const page = scan.out.slice(0, q.limit);
  const last = page[page.length - 1];
  let nextCursor: string | null = null;
  if (scan.out.length > q.limit && last) nextCursor = encodeCursor(last.kind === 'object' ? { pk, k: last.record.key } : { pk, u: last.prefix });
  return { items: page, nextCursor };
}

/** What one scan reads: the partition, the sort-key range of the bucket under the prefix, and how many entries. */
interface ScanRange {
  pk: string;
  skPrefix: string;
  hiSk: string;
  prefix: string;
  delimiter: string | null;
  want: number;
}

/** What a scan does after one item: go on, stop, seek to a key, or resume the query past a group. */
type Step = { kind: 'next' } | { kind: 'stop' } | { kind: 'seek'; from: string | null } | { kind: 'resume'; start: Record<string, unknown> | undefined };

/** One listing's walk over the table: the entries found so far and where it stands. */
class CatalogScan {
  readonly out: CatalogEntry[] = [];
  readonly #db: Db;
  readonly #r: ScanRange;
  #after: Position | null;

  constructor(db: Db, range: ScanRange, after: Position | null) {
    this.#db = db;
    this.#r = range;
    this.#after = after;
  }

  async run(): Promise<void> {
    const { prefix, want } = this.#r;
    let from: string | null = this.#after === null ? prefix : firstPast(this.#after);
    if (from !== null && compareKeys(from, prefix) < 0) from = prefix;
    while (from !== null && this.out.length < want) from = await this.#readFrom(from);
  }

  /** Reads sort keys from `from` up to the bound; answers where to seek next, or null when done. */
  async #readFrom(from: string): Promise<string | null> {
    const { pk, skPrefix, hiSk, want } = this.#r;
    const loSk = skPrefix + (await keyPartFloor(from));
    if (compareKeys(loSk, hiSk) > 0) return null;
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.#db.doc.send(
        new QueryCommand({
          TableName: this.#db.table,
          KeyConditionExpression: 'pk = :pk AND sk BETWEEN :lo AND :hi',
          ExpressionAttributeValues: { ':pk': pk, ':lo': loSk, ':hi': hiSk },
          ExclusiveStartKey: start,
          Limit: Math.min(1000, want - this.out.length),
          ConsistentRead: true,
        }),
      );
      start = page.LastEvaluatedKey;
      for (const item of page.Items ?? []) {
        const step = await this.#take(item);
        if (step.kind === 'stop') return null;
        if (step.kind === 'seek') return step.from;
        if (step.kind === 'resume') {
          start = step.start;
          break;
        }
      }
    } while (start);
    return null;
  }

  /** Takes one item (a row, or a group of long keys read whole) into the listing. */
  async #take(item: Record<string, any>): Promise<Step> {
    const { pk, skPrefix, hiSk, prefix, delimiter, want } = this.#r;
    const grp = typeof item.grp === 'string' ? item.grp : null;
    // A group sorts by hash in the table: read all of it and take it in key order.
    const rows = grp === null ? [toObject(item)] : await groupMembers(this.#db, pk, grp);
    for (const row of rows) {
      if (!row.key.startsWith(prefix) || !isPast(row.key, this.#after)) continue;
      const cut = delimiter === null ? -1 : row.key.indexOf(delimiter, prefix.length);
      if (cut >= 0) {
        const under = row.key.slice(0, cut + delimiter!.length);
        this.out.push({ kind: 'prefix', prefix: under });
        this.#after = { under };
      } else {
        this.out.push({ kind: 'object', record: row });
        this.#after = { key: row.key };
      }
      if (this.out.length >= want) return { kind: 'stop' };
      // Every other key under the prefix just answered is skipped: seek past them.
      if (cut >= 0 && grp === null) return { kind: 'seek', from: firstPast(this.#after) };
    }
    if (grp === null) return { kind: 'next' };
    const past = grp + AFTER_GROUP;
    if (this.#after !== null && 'under' in this.#after) {
      // Seek past the keys under the prefix just answered, when they reach beyond the group
      // (seeking to a point inside it would read the group again, and again).
      const next = firstPast(this.#after);
      if (next === null) return { kind: 'stop' };
      if (compareKeys(skPrefix + (await keyPartFloor(next)), past) > 0) return { kind: 'seek', from: next };
    }
    // Resume past the group; a group ends before the bound when one of its keys is in range.
    return { kind: 'resume', start: compareKeys(past, hiSk) < 0 ? { pk, sk: past } : undefined };
  }
}

/** Lists the rows of a bucket in key order (pending rows included), `limit` at a time (`listCatalog` without prefix). */
export async function listObjects(db: Db, projectId: string, bucket: string, limit: number, cursor?: string): Promise<Page<ObjectRecord>> {
  const page = await listCatalog(db, projectId, bucket, { limit, cursor });
  return { items: page.items.flatMap((e) => (e.kind === 'object' ? [e.record] : [])), nextCursor: page.nextCursor };
}
