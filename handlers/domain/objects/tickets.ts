/**
 * Upload and download tickets (the interface contract "POST storage/uploads|downloads"): where to
 * send the bytes or read them, on the service origin, and until when.
 */
import type { ProjectRecord } from '../../../shared/db/projects.ts';
import { getObject, objectView, reserveObject } from '../../../shared/db/storage.ts';
import { newId } from '../../../shared/ids.ts';
import { DEFAULT_CONTENT_TYPE } from '../../../shared/schemas/storage.ts';
import { nowIso } from '../../../shared/time.ts';
import type { Deps } from '../../context.ts';
import { notFoundObject, requireBucket } from './catalog.ts';

/**
 * The path of an object on the service origin. Each segment is percent-encoded and `/` kept, as the
 * contract shows; a key with a `.` or `..` segment has its `/` encoded too, since clients collapse
 * dot segments (`a/../b` would otherwise reach `b`).
 */
export function objectPath(projectId: string, bucket: string, key: string): string {
  const segments = key.split('/');
  const encoded = segments.some((s) => s === '.' || s === '..')
    ? encodeURIComponent(key)
    : segments.map(encodeURIComponent).join('/');
  return `/v0/projects/${projectId}/storage/objects/${bucket}/${encoded}`;
}

/** A ticket to upload `bucket/key`, with the pending row it reserves (an existing row is kept). */
export async function uploadTicket(
  deps: Deps,
  project: ProjectRecord,
  input: { bucket: string; key: string; contentType: string | null | undefined },
) {
  const { settings, db } = deps;
  await requireBucket(deps, project.id, input.bucket);
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

/** A ticket to read `bucket/key`; 404 while the object has no bytes. */
export async function downloadTicket(deps: Deps, project: ProjectRecord, input: { bucket: string; key: string }) {
  const { settings, db } = deps;
  await requireBucket(deps, project.id, input.bucket);
  const row = await getObject(db, project.id, input.bucket, input.key);
  if (!row) throw notFoundObject(input.bucket, input.key);
  if (row.state !== 'stored') throw notFoundObject(input.bucket, input.key, true);
  return {
    method: 'GET',
    download_url: objectPath(project.id, input.bucket, input.key),
    headers: {},
    expires_at: nowIso(deps.now() + settings.SVCD_TICKET_TTL_SECONDS * 1000),
    object: objectView(row),
  };
}
