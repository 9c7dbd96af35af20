/** Deleting an object: the row first, then its bytes (docs/storage.md "Nothing lost"). */
import type { ProjectRecord } from '../../../shared/db/projects.ts';
import { newReceipt } from '../../../shared/db/receipts.ts';
import { getObject, removeObject, type ObjectRecord } from '../../../shared/db/storage.ts';
import { errors } from '../../../shared/errors.ts';
import { nowIso } from '../../../shared/time.ts';
import type { Deps } from '../../context.ts';
import { discardBlob, storeFor } from './blobs.ts';
import { FLIP_ATTEMPTS, backOff, notFoundObject, requireBucket } from './catalog.ts';

/** Deletes `bucket/key` of the caller's `project` with its receipt; answers the row it removed. */
export async function deleteObject(
  deps: Deps,
  input: { requestId: string; accountId: string; project: ProjectRecord; bucket: string; key: string },
): Promise<ObjectRecord> {
  const { requestId, accountId, project, bucket, key } = input;
  await requireBucket(deps, project.id, bucket);
  for (let attempt = 1; ; attempt++) {
    const row = await getObject(deps.db, project.id, bucket, key);
    if (!row) throw notFoundObject(bucket, key);
    // Resolve the store first: when it is known to be down, answer so before touching the row.
    const store = row.blob !== null ? await storeFor(deps, requestId, project, row.backend) : undefined;
    const at = nowIso(deps.now());
    const receipt = newReceipt({ project: project.id, op: 'object.delete', target: `${bucket}/${key}`, actor: accountId, request_id: requestId, at });
    if (await removeObject(deps.db, row, receipt)) {
      // Row first, bytes second: a failure here leaves an unreferenced blob, never a row without bytes.
      if (row.blob !== null) await discardBlob(deps, requestId, project, row.backend, row.blob, store);
      return row;
    }
    if (attempt >= FLIP_ATTEMPTS) throw errors.conflict(`object ${bucket}/${key} is being written concurrently, retry`);
    await backOff(attempt);
  }
}
