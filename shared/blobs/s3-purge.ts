/**
 * Removal of every `s3` blob of a deleted project (docs/lifecycle.md "Deleting a project"): all the
 * S3 objects under the project's prefix `blobs/<project>/` (shared/blobs/s3.ts `s3KeyOf`), whether a
 * catalog row still names them or a crashed write left them unreferenced (docs/storage.md "Nothing
 * lost"). Listing needs `s3:ListBucket` on the blob bucket besides `s3:DeleteObject`.
 */
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { ServiceError, errors } from '../errors.ts';
import { createS3BlobStore, createS3Client, s3KeyOf, type S3Settings } from './s3.ts';

/** Deletes at most this many blobs at once. */
const WIDTH = 8;

/** Deletes every S3 blob of `projectId`; answers how many there were. Idempotent. */
export async function deleteProjectS3Blobs(settings: S3Settings, projectId: string): Promise<number> {
  const client = createS3Client(settings);
  const store = createS3BlobStore(client, settings.SVCD_S3_BUCKET);
  const prefix = s3KeyOf(projectId, '');
  let deleted = 0;
  try {
    let token: string | undefined;
    do {
      const page = await client.send(new ListObjectsV2Command({ Bucket: settings.SVCD_S3_BUCKET, Prefix: prefix, ContinuationToken: token }));
      const names = (page.Contents ?? []).map((o) => (o.Key ?? '').slice(prefix.length)).filter((n) => n !== '');
      for (let i = 0; i < names.length; i += WIDTH) {
        await Promise.all(names.slice(i, i + WIDTH).map((name) => store.delete(projectId, name)));
      }
      deleted += names.length;
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  } catch (err) {
    if (err instanceof ServiceError) throw err;
    // The kind only: an SDK message may carry an endpoint or a credential hint (docs/api.md "Errors").
    throw errors.upstream(`the s3 blob store failed (${(err as { name?: string } | null)?.name ?? 'Error'})`);
  } finally {
    client.destroy();
  }
  return deleted;
}
