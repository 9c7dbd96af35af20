/**
 * The object catalog on DynamoDB Local: listing is in key order even for keys of up to 4 KiB of
 * UTF-8 that share long prefixes, and the byte routes' batched read answers exactly what was asked.
 * The sort-key encoding itself is checked beside it (shared/db/catalog-keys.test.ts).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../shared/db/client.ts';
import { compareKeys, KEY_PART_BUDGET } from '../../shared/db/catalog-keys.ts';
import { createBucket, getProjectBucketObject, listObjects, reserveObject, type ObjectRecord } from '../../shared/db/storage.ts';
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
    const at = new Date(0).toISOString();
    for (const [i, key] of keys.entries()) {
      const row: ObjectRecord = {
        id: `obj_${i.toString(16).padStart(16, '0')}`,
        project,
        bucket: 'long-keys',
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
      expect((await reserveObject(db, row)).created).toBe(true);
    }
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

describe('the byte routes\' batched read', () => {
  it('answers the bucket and the row of exactly the key asked, and null for what is absent', async () => {
    const { db } = await testDeployment();
    const project = 'prj_00000000000000bb';
    const at = new Date(0).toISOString();
    await createBucket(db, { project, name: 'batched', created_at: at });
    const long = 'q/'.repeat(470);
    const row = (key: string, id: string): ObjectRecord => ({
      id,
      project,
      bucket: 'batched',
      key,
      size: 0,
      etag: '',
      content_type: 'text/plain',
      backend: 'fs',
      state: 'pending',
      created_at: at,
      updated_at: at,
      blob: null,
    });
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
