/**
 * Blob names (docs/storage.md): the SHA-256 of (project, bucket, key, write id), in hex.
 * A name says nothing about the key and has a fixed alphabet, so no key (`../../x`, `%2e%2e/`,
 * unicode, 4 KiB long) can shape a path or an S3 key; the fresh write id makes every write a new,
 * immutable blob.
 */
import { randomHex } from '../ids.ts';

/** Pattern of a blob name; both backends refuse anything else. */
export const BLOB_NAME_PATTERN = /^[0-9a-f]{64}$/;

/** A fresh write id (128 random bits). */
export function newWriteId(): string {
  return randomHex(16);
}

/** The blob name of one write of `key`. NUL separates the parts: bucket names and ids cannot hold one. */
export async function blobName(project: string, bucket: string, key: string, writeId: string): Promise<string> {
  const data = new TextEncoder().encode(`${project}\0${bucket}\0${key}\0${writeId}`);
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', data));
  let out = '';
  for (const b of digest) out += b.toString(16).padStart(2, '0');
  return out;
}
