/** Deleting an object: the row first, then its bytes (docs/storage.md "Nothing lost"). */
import type { BlobStore } from '../../../shared/blobs/store.ts';
import type { ProjectRecord } from '../../../shared/db/projects.ts';
import { newReceipt } from '../../../shared/db/receipts.ts';
import { getObject, removeObject, type ObjectRecord } from '../../../shared/db/storage.ts';
import { errors } from '../../../shared/errors.ts';
import { nowIso } from '../../../shared/time.ts';
import type { Deps } from '../../context.ts';
import { discardBlob, storeFor } from './blobs.ts';
import { FLIP_ATTEMPTS, backOff, notFoundObject, requireBucket } from './catalog.ts';

/** Who deletes: the request and the owner's account (for the receipts), and the project. */
export interface Deleter {
  requestId: string;
  accountId: string;
  project: ProjectRecord;
}

/**
 * Deletes `bucket/key` of the caller's `project` with its receipt; answers the row it removed. Both
 * forms of the route (the contract's body form and the path form) call this.
 */
export async function deleteObject(deps: Deps, input: Deleter & { bucket: string; key: string }): Promise<ObjectRecord> {
  const { requestId, project, bucket, key } = input;
  await requireBucket(deps, project.id, bucket);
  const removed = await removeRow(deps, input, bucket, key);
  if (!removed) throw notFoundObject(bucket, key);
  const { row, store } = removed;
  // Row first, bytes second: a failure here leaves an unreferenced blob, never a row without bytes.
  if (row.blob !== null) await discardBlob(deps, requestId, project, row.backend, row.blob, store);
  return row;
}

/**
 * Removes the row of `bucket/key` as it stands, with its `object.delete` receipt, re-reading it
 * when a writer changed it meanwhile; `first` is the row as the caller already read it. Answers the
 * row removed and the store of its bytes (resolved first: when it is known to be down, the row is
 * left alone), or null when there is no row. With `recordBlob`, the blob is written down in the same
 * transaction (a bucket deletion, bucket-delete.ts); the caller deletes the bytes either way.
 */
export async function removeRow(
  deps: Deps,
  who: Deleter,
  bucket: string,
  key: string,
  { first, recordBlob = false }: { first?: ObjectRecord; recordBlob?: boolean } = {},
): Promise<{ row: ObjectRecord; store: BlobStore | undefined } | null> {
  const { requestId, accountId, project } = who;
  let row = first ?? (await getObject(deps.db, project.id, bucket, key));
  for (let attempt = 1; ; attempt++) {
    if (!row) return null;
    const store = row.blob !== null ? await storeFor(deps, requestId, project, row.backend) : undefined;
    const at = nowIso(deps.now());
    const receipt = newReceipt({ project: project.id, op: 'object.delete', target: `${bucket}/${key}`, actor: accountId, request_id: requestId, at });
    if (await removeObject(deps.db, row, receipt, { recordBlob })) return { row, store };
    if (attempt >= FLIP_ATTEMPTS) throw errors.conflict(`object ${bucket}/${key} is being written concurrently, retry`);
    await backOff(attempt);
    row = await getObject(deps.db, project.id, bucket, key);
  }
}
