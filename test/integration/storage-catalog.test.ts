/**
 * The object catalog on DynamoDB Local: listing is in key order even for keys of up to 4 KiB of
 * UTF-8 that share long prefixes, prefix and delimiter listings answer what a brute-force model of
 * S3's ListObjectsV2 answers on random keys, and the byte routes' batched read answers exactly what
 * was asked. The sort-key encoding itself is checked beside it (shared/db/catalog-keys.test.ts).
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../shared/db/client.ts';
import { compareKeys, KEY_PART_BUDGET } from '../../shared/db/catalog-keys.ts';
import { newReceipt } from '../../shared/db/receipts.ts';
import { commitObject, createBucket, getObject, getProjectBucketObject, listCatalog, listObjects, reserveObject, type ObjectRecord } from '../../shared/db/storage.ts';
import { testDeployment } from '../helpers/env.ts';

describe('listing long keys from DynamoDB', () => {
  let db: Db;
  const project = 'prj_00000000000000aa';
  const keys: string[] = [];

  beforeAll(async () => {
    ({ db } = await testDeployment());
    const long = 'p/'.repeat(470); // 940 bytes: every key below crosses the budget
    for (const c of ['a', 'b', 'é', '😀', '\u{10000}', 'z']) for (const d of ['1', '2', '日']) keys.push(long + c + d);
    keys.push(...['😀'.repeat(1024), '😀'.repeat(1023) + 'a', '😀'.repeat(1023) + '\u{10ffff}']);
    keys.push(...['p/', 'p/p/', long.slice(0, KEY_PART_BUDGET), 'a', 'zz', long + 'a', '\uffff', '\u{10000}']);
    await createBucket(db, { project, name: 'long-keys', created_at: new Date(0).toISOString() });
    for (const [i, key] of keys.entries()) expect((await reserveObject(db, pendingRow(project, 'long-keys', key, i))).created).toBe(true);
    keys.sort(compareKeys);
  });

  it('answers every row once, in key order, at every page size', async () => {
    for (const limit of [1, 2, 3, 5, 7, 100]) {
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await listObjects(db, project, 'long-keys', limit, cursor);
        expect(page.items.length).toBeLessThanOrEqual(limit);
        seen.push(...page.items.map((r) => r.key));
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      expect(seen, `limit ${limit}`).toEqual(keys);
    }
  });

  it('says there is no next page exactly when the last row was answered', async () => {
    const page = await listObjects(db, project, 'long-keys', keys.length);
    expect(page.items).toHaveLength(keys.length);
    expect(page.nextCursor).toBeNull();
    const short = await listObjects(db, project, 'long-keys', keys.length - 1);
    expect(short.nextCursor).not.toBeNull();
  });
});

/** A pending row of `key` (listing does not care about the bytes). */
function pendingRow(project: string, bucket: string, key: string, i: number): ObjectRecord {
  const at = new Date(0).toISOString();
  return {
    id: `obj_${i.toString(16).padStart(16, '0')}`,
    project,
    bucket,
    key,
    size: 0,
    etag: '',
    content_type: 'application/octet-stream',
    backend: 'fs',
    state: 'pending',
    created_at: at,
    updated_at: at,
    blob: null,
  };
}

/** A listing entry as compared: a key, or a common prefix. */
type Entry = { key: string } | { prefix: string };

/** S3's ListObjectsV2 by brute force: the keys under `prefix`, rolled up at the first `delimiter` after it. */
function model(keys: readonly string[], prefix: string, delimiter: string | undefined): Entry[] {
  const out: Entry[] = [];
  const rolled = new Set<string>();
  for (const key of [...keys].sort(compareKeys)) {
    if (!key.startsWith(prefix)) continue;
    const cut = delimiter === undefined ? -1 : key.indexOf(delimiter, prefix.length);
    if (cut < 0) {
      out.push({ key });
      continue;
    }
    const under = key.slice(0, cut + delimiter!.length);
    if (!rolled.has(under)) out.push({ prefix: under });
    rolled.add(under);
  }
  return out;
}

/** Every page of a listing, `limit` at a time; each page at most `limit` long and never empty but for an empty listing. */
async function listAll(db: Db, project: string, bucket: string, query: { prefix?: string; delimiter?: string }, limit: number): Promise<Entry[]> {
  const seen: Entry[] = [];
  let cursor: string | undefined;
  do {
    const page = await listCatalog(db, project, bucket, { limit, cursor, ...query });
    expect(page.items.length).toBeLessThanOrEqual(limit);
    if (cursor !== undefined) expect(page.items.length).toBeGreaterThan(0);
    seen.push(...page.items.map((e): Entry => (e.kind === 'object' ? { key: e.record.key } : { prefix: e.prefix })));
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return seen;
}

describe('listing by prefix and delimiter, against a brute-force model', () => {
  // Few characters, so that random keys share prefixes and hold delimiters; `/` and `//` as S3 users
  // write them, characters of every UTF-8 width, and a long shared stem that crosses the sort-key budget.
  const chars = ['a', 'b', '/', '-', 'é', '日', '😀', '\u0000'];
  const stem = 'd/'.repeat(462); // 924 bytes
  const keyArb = fc
    .tuple(fc.constantFrom('', '', '', '', '', 'a/', 'a/', stem), fc.array(fc.constantFrom(...chars), { minLength: 1, maxLength: 6 }))
    .map(([head, tail]) => head + tail.join(''));
  const delimiterArb = fc.option(fc.constantFrom('/', '//', 'a', '/b', 'é', '😀', '\u0000', 'd/d'), { nil: undefined });
  /** A prefix: often the beginning of a key of the set, sometimes anything. */
  const prefixArb = (keys: readonly string[]) =>
    fc.oneof(
      fc.constantFrom(...keys).chain((k) => fc.nat({ max: [...k].length }).map((n) => [...k].slice(0, n).join(''))),
      fc.array(fc.constantFrom(...chars), { maxLength: 3 }).map((a) => a.join('')),
    );

  it('answers the model on one random bucket, for random prefixes, delimiters and page sizes', async () => {
    const { db } = await testDeployment();
    const project = 'prj_00000000000000cc';
    await createBucket(db, { project, name: 'model', created_at: new Date(0).toISOString() });
    const keys = [...new Set(fc.sample(keyArb, { numRuns: 80, seed: 20260501 }))];
    for (const [i, key] of keys.entries()) await reserveObject(db, pendingRow(project, 'model', key, i));
    await fc.assert(
      fc.asyncProperty(prefixArb(keys), delimiterArb, fc.integer({ min: 2, max: 12 }), async (prefix, delimiter, limit) => {
        const query = { ...(prefix !== '' ? { prefix } : {}), ...(delimiter !== undefined ? { delimiter } : {}) };
        expect(await listAll(db, project, 'model', query, limit)).toEqual(model(keys, prefix, delimiter));
      }),
      { numRuns: 60 },
    );
  }, 180_000);

  it('answers the model on small random buckets', async () => {
    const { db } = await testDeployment();
    const project = 'prj_00000000000000dd';
    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(keyArb, { minLength: 0, maxLength: 8 }), delimiterArb, fc.integer({ min: 1, max: 3 }), async (keys, delimiter, limit) => {
        const bucket = `small-${n++}`;
        await createBucket(db, { project, name: bucket, created_at: new Date(0).toISOString() });
        for (const [i, key] of keys.entries()) await reserveObject(db, pendingRow(project, bucket, key, i));
        for (const prefix of ['', 'a/', stem, ...keys.slice(0, 1)]) {
          const query = { ...(prefix !== '' ? { prefix } : {}), ...(delimiter !== undefined ? { delimiter } : {}) };
          expect(await listAll(db, project, bucket, query, limit), JSON.stringify({ prefix, delimiter })).toEqual(model(keys, prefix, delimiter));
        }
      }),
      { numRuns: 25 },
    );
  }, 180_000);
});

describe('a conditional flip', () => {
  it('is refused by DynamoDB itself when the precondition does not hold of the row, even one read as unchanged', async () => {
    const { db } = await testDeployment();
    const project = 'prj_00000000000000ee';
    await createBucket(db, { project, name: 'flips', created_at: new Date(0).toISOString() });
    const stored: ObjectRecord = { ...pendingRow(project, 'flips', 'k', 1), state: 'stored', etag: 'e1', size: 1, blob: 'a'.repeat(64) };
    const receipt = () => newReceipt({ project, op: 'object.put', target: 'flips/k', actor: 'acct_0000000000000001', request_id: 'req_1', at: new Date().toISOString() });
    expect(await commitObject(db, stored, null, receipt())).toBe(true);
    const next = { ...stored, etag: 'e2', blob: 'b'.repeat(64) };
    // The writer's view of the row is right (same blob); only the precondition is wrong.
    expect(await commitObject(db, next, stored, receipt(), { ifMatch: ['e0'], ifNoneMatch: null })).toBe(false);
    expect(await commitObject(db, next, stored, receipt(), { ifMatch: null, ifNoneMatch: '*' })).toBe(false);
    expect(await commitObject(db, next, stored, receipt(), { ifMatch: null, ifNoneMatch: ['e1'] })).toBe(false);
    expect((await getObject(db, project, 'flips', 'k'))?.etag).toBe('e1');
    expect(await commitObject(db, next, stored, receipt(), { ifMatch: ['e0', 'e1'], ifNoneMatch: ['e9'] })).toBe(true);
    expect((await getObject(db, project, 'flips', 'k'))?.etag).toBe('e2');
  });
});

describe('the byte routes\' batched read', () => {
  it('answers the bucket and the row of exactly the key asked, and null for what is absent', async () => {
    const { db } = await testDeployment();
    const project = 'prj_00000000000000bb';
    const at = new Date(0).toISOString();
    await createBucket(db, { project, name: 'batched', created_at: at });
    const long = 'q/'.repeat(470);
    const row = (key: string, id: string): ObjectRecord => ({ ...pendingRow(project, 'batched', key, 0), id, content_type: 'text/plain' });
    await reserveObject(db, row('short', 'obj_00000000000000b1'));
    await reserveObject(db, row(long + 'a', 'obj_00000000000000b2'));

    const both = await getProjectBucketObject(db, project, 'batched', 'short');
    expect(both.project).toBeNull(); // no project item was written here
    expect(both.bucket).toEqual({ project, name: 'batched', created_at: at });
    expect(both.object?.id).toBe('obj_00000000000000b1');
    // A long key shares its group's sort-key prefix with others: only its own row answers.
    expect((await getProjectBucketObject(db, project, 'batched', long + 'a')).object?.id).toBe('obj_00000000000000b2');
    expect((await getProjectBucketObject(db, project, 'batched', long + 'b')).object).toBeNull();
    expect(await getProjectBucketObject(db, project, 'nope', 'short')).toEqual({ project: null, bucket: null, object: null });
    expect((await getProjectBucketObject(db, project, 'batched', null)).object).toBeNull();
  });
});
