/**
 * Repository: reads of the object catalog (the interface contract "Object catalog row";
 * docs/storage.md "Catalog layout in DynamoDB"): one row, a project with a bucket and a row in one
 * round trip, and every blob the rows name. Rows are `PRJ#<prj>` / `OBJ#<bucket>#<key part>`, the
 * key part built by shared/db/catalog-keys.ts.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { Db, ItemsRead, TableKey } from './client.ts';
import { batchGetItems } from './client.ts';
import { objectKeyOf } from './catalog-keys.ts';
import { queryEach } from './pagination.ts';
import { toRecord as toProject, type ProjectRecord } from './projects.ts';
import { toBucket, toObject, type BucketRecord, type ObjectRecord } from './storage-records.ts';
import { keys, prefixes } from './table.ts';

/** Reads the row of `bucket/key`, or null. */
export async function getObject(db: Db, projectId: string, bucket: string, key: string): Promise<ObjectRecord | null> {
  const { pk, sk } = await objectKeyOf(projectId, bucket, key);
  const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: { pk, sk }, ConsistentRead: true }));
  // The key is compared too: a sort key from a hash must never answer for another key.
  return out.Item && out.Item.key === key ? toObject(out.Item) : null;
}

/**
 * Reads a project, one of its buckets (when `bucket` is given) and the row of `bucket/key` (when
 * `key` is given too) in one round trip (a consistent BatchGetItem): the byte routes need them all
 * at once, and one call costs about what one GetItem does where three parallel ones cost twice
 * that. Ownership is the caller's to judge before anything else is used.
 */
export async function getProjectBucketObject(
  db: Db,
  projectId: string,
  bucket: string | null,
  key: string | null,
): Promise<{ project: ProjectRecord | null; bucket: BucketRecord | null; object: ObjectRecord | null }> {
  const catalog = await catalogKeys(projectId, bucket, key);
  return catalog.read(await batchGetItems(db, catalog.keys));
}

/** What a batched read of a project, a bucket and a row reads (`keys`) and finds in what it read (`read`). */
export interface CatalogRead {
  keys: TableKey[];
  read(items: ItemsRead): { project: ProjectRecord | null; bucket: BucketRecord | null; object: ObjectRecord | null };
}

/**
 * The items of `getProjectBucketObject`, for a caller that joins them to a read of its own (the
 * session's standing, handlers/domain/sessions.ts): one round trip for all.
 */
export async function catalogKeys(projectId: string, bucket: string | null, key: string | null): Promise<CatalogRead> {
  const projectKey = keys.project(projectId);
  const bucketKey = bucket !== null ? keys.bucket(projectId, bucket) : null;
  const objectKey = bucket !== null && key !== null ? await objectKeyOf(projectId, bucket, key) : null;
  const rowKey = objectKey && { pk: objectKey.pk, sk: objectKey.sk };
  return {
    keys: [projectKey, bucketKey, rowKey].filter((k) => k !== null),
    read(items) {
      const projectItem = items.get(projectKey);
      const bucketItem = bucketKey ? items.get(bucketKey) : undefined;
      const objectItem = rowKey ? items.get(rowKey) : undefined;
      return {
        project: projectItem ? toProject(projectItem) : null,
        bucket: bucketItem ? toBucket(bucketItem) : null,
        // The key is compared too: a sort key from a hash must never answer for another key.
        object: objectItem && objectItem.key === key ? toObject(objectItem) : null,
      };
    },
  };
}

/**
 * Every blob name the project's catalog rows point at, pending rows having none (read consistently,
 * `blob` alone). The host agent's sweep of fs blobs no row references uses it
 * (host-agent/blobs/sweep.ts); blob names are unique per write, so a name is referenced or not
 * whatever backend its row names.
 */
export async function referencedBlobs(db: Db, projectId: string): Promise<Set<string>> {
  const names = new Set<string>();
  const query = {
    TableName: db.table,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
    ExpressionAttributeValues: { ':pk': keys.objectsOf(projectId).pk, ':prefix': prefixes.object },
    // `blob` is a DynamoDB reserved word.
    ProjectionExpression: '#blob',
    ExpressionAttributeNames: { '#blob': 'blob' },
    ConsistentRead: true,
  };
  await queryEach(db, query, (items) => {
    for (const item of items) if (typeof item.blob === 'string') names.add(item.blob);
  });
  return names;
}
