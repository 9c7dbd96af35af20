/**
 * Upload and download tickets (the interface contract "POST storage/uploads|downloads"): where to
 * send the bytes or read them, on the service origin, and until when; a download ticket may carry a
 * signed URL that needs no session (docs/storage.md "Signed URLs").
 */
import type { ProjectRecord } from '../../../shared/db/projects.ts';
import { getObject, objectView, reserveObject } from '../../../shared/db/storage.ts';
import { newId } from '../../../shared/ids.ts';
import { DEFAULT_CONTENT_TYPE } from '../../../shared/schemas/storage.ts';
import { errors } from '../../../shared/errors.ts';
import { nowIso } from '../../../shared/time.ts';
import type { Deps } from '../../context.ts';
import { closedBucket, notFoundObject, requireBucket } from './catalog.ts';
import { signedUrl, verifySignedUrl } from './signed-urls.ts';
import { objectPath } from '../../../shared/object-path.ts';

// The path of an object on the service origin lives in shared/ so the SDK builds the same one.
export { objectPath } from '../../../shared/object-path.ts';

/** A ticket to upload `bucket/key`, with the pending row it reserves (an existing row is kept). */
export async function uploadTicket(
  deps: Deps,
  project: ProjectRecord,
  input: { bucket: string; key: string; contentType: string | null | undefined },
) {
  const { settings, db } = deps;
  const closed = closedBucket(await requireBucket(deps, project.id, input.bucket), input.bucket);
  if (closed) throw closed;
  const now = deps.now();
  const at = nowIso(now);
  // A ticket reserves a pending row; an existing row (pending or stored) is kept as it is, so a
  // ticket never hides bytes that are already readable.
  const { record } = await reserveObject(db, {
    id: newId('obj'),
    project: project.id,
    bucket: input.bucket,
    key: input.key,
    size: 0,
    etag: '',
    content_type: input.contentType ?? DEFAULT_CONTENT_TYPE,
    backend: settings.SVCD_BLOB_BACKEND,
    state: 'pending',
    created_at: at,
    updated_at: at,
    blob: null,
  });
  return {
    object_id: record.id,
    method: 'PUT',
    upload_url: objectPath(project.id, input.bucket, input.key),
    headers: { 'content-type': input.contentType ?? record.content_type },
    max_bytes: settings.SVCD_STORAGE_MAX_BYTES,
    expires_at: nowIso(now + settings.SVCD_TICKET_TTL_SECONDS * 1000),
  };
}

/**
 * A ticket to read `bucket/key`; 404 while the object has no bytes. With `signed`, the ticket also
 * carries `signed_url`, good for `expiresIn` seconds (default the ticket lifetime), and `expires_at`
 * is when that URL stops working.
 */
export async function downloadTicket(
  deps: Deps,
  project: ProjectRecord,
  input: { bucket: string; key: string; signed?: boolean | undefined; expiresIn?: number | undefined },
) {
  const { settings, db } = deps;
  const max = settings.SVCD_SIGNED_URL_MAX_SECONDS;
  if (input.expiresIn !== undefined && input.expiresIn > max) throw errors.invalid(`expires_in: must be at most ${max} seconds`);
  await requireBucket(deps, project.id, input.bucket);
  const row = await getObject(db, project.id, input.bucket, input.key);
  if (!row) throw notFoundObject(input.bucket, input.key);
  if (row.state !== 'stored') throw notFoundObject(input.bucket, input.key, true);
  const path = objectPath(project.id, input.bucket, input.key);
  const now = deps.now();
  const ticket = {
    method: 'GET',
    download_url: path,
    headers: {},
    expires_at: nowIso(now + settings.SVCD_TICKET_TTL_SECONDS * 1000),
    object: objectView(row),
  };
  if (!input.signed) return ticket;
  // Whole seconds, as the URL carries them.
  const expires = Math.floor(now / 1000) + (input.expiresIn ?? Math.min(settings.SVCD_TICKET_TTL_SECONDS, max));
  return { ...ticket, expires_at: nowIso(expires * 1000), signed_url: await signedUrl(settings.SVCD_SESSION_SECRET, 'GET', path, expires) };
}

/**
 * Checks a signed URL presented for `bucket/key` of `projectId` (as the request path names them,
 * decoded): its signature must be the one a ticket issued for exactly that object's path, and
 * unexpired; anything else is 401 (signed-urls.ts). HEAD is checked as the GET it is without a body.
 */
export async function checkSignedDownload(
  deps: Deps,
  input: { projectId: string; bucket: string; key: string; expires: string | null; signature: string | null },
): Promise<void> {
  const path = objectPath(input.projectId, input.bucket, input.key);
  await verifySignedUrl(deps.settings.SVCD_SESSION_SECRET, 'GET', path, input, deps.now());
}
