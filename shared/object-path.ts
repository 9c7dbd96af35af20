/** Object paths on the service origin (docs/storage.md "Key in the path"), shared by the handlers and the SDK. Import-free. */

/**
 * The path of an object on the service origin. Each segment is percent-encoded and `/` kept, as the
 * contract shows; a key with a `.` or `..` segment has its `/` encoded too, since clients collapse
 * dot segments (`a/../b` would otherwise reach `b`).
 */
export function objectPath(projectId: string, bucket: string, key: string): string {
  return `/v0/projects/${projectId}/storage/objects/${bucket}/${encodeObjectKey(key)}`;
}

/** An object key as the last part of its path (see `objectPath`). */
export function encodeObjectKey(key: string): string {
  const segments = key.split('/');
  return segments.some((s) => s === '.' || s === '..') ? encodeURIComponent(key) : segments.map(encodeURIComponent).join('/');
}
