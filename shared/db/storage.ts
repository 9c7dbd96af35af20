/**
 * Repository: buckets and the object catalog (the interface contract "Bucket record", "Object
 * catalog row", "Object states"; docs/storage.md "Catalog layout in DynamoDB"), one module per job:
 *
 * - ./storage-records.ts: the records, their items, and `guarded` (a change and its receipt in one
 *   transaction);
 * - ./buckets.ts: buckets, their deletion mark, and the blob-deletion records a deletion leaves;
 * - ./catalog-reads.ts: one row, a project with a bucket and a row in one round trip, referenced blobs;
 * - ./catalog-writes.ts: reserving, committing and removing rows on what the writer read;
 * - ./catalog-listing.ts: a bucket's rows and common prefixes in key order.
 *
 * Both live in the project's partition `PRJ#<prj>`: buckets under `BKT#<bucket>`, catalog rows under
 * `OBJ#<bucket>#<key part>`, the key part built by shared/db/catalog-keys.ts.
 */
export { objectView, type BlobDeletion, type BucketRecord, type ObjectRecord, type ObjectRow, type ObjectState } from './storage-records.ts';
export {
  bucketHasRows,
  createBucket,
  forgetBlobDeletion,
  getBucket,
  listBlobDeletions,
  listBuckets,
  markBucketDeleting,
  removeBucket,
  unmarkBucketDeleting,
} from './buckets.ts';
export { catalogKeys, getObject, getProjectBucketObject, referencedBlobs, type CatalogRead } from './catalog-reads.ts';
export { commitObject, removeObject, reserveObject, type EtagCondition, type PutPrecondition } from './catalog-writes.ts';
export { listCatalog, listObjects, type CatalogEntry, type CatalogQuery } from './catalog-listing.ts';
