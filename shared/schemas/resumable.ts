/**
 * Resumable uploads' identifiers and TUS 1.0.0 headers (https://tus.io/protocols/resumable-upload;
 * docs/storage.md "Resumable uploads"): the upload id, the protocol's constants and the reading of
 * `Upload-Metadata`. Web-standard only (the SDK's declarations import it).
 */
import { z } from 'zod';
import { fromBase64 } from '../base64.ts';

/** An upload id: `upl_` and 16 hex (shared/ids.ts's shape). */
export const UPLOAD_ID_PATTERN = /^upl_[0-9a-f]{16}$/;
export const uploadIdSchema = z.string().regex(UPLOAD_ID_PATTERN, 'must match ^upl_[0-9a-f]{16}$');

/** The one protocol version spoken, and the extensions. */
export const TUS_VERSION = '1.0.0';
export const TUS_EXTENSIONS = 'creation,creation-with-upload,termination,expiration';
/** The media type of a PATCH body (and of a POST that carries the first bytes). */
export const TUS_CONTENT_TYPE = 'application/offset+octet-stream';

/**
 * `Upload-Metadata`: comma-separated `name` or `name base64(value)` pairs; names are unique ASCII
 * without spaces or commas. Values are decoded as UTF-8. 400 on anything else.
 */
export function parseUploadMetadata(raw: string | null): Map<string, string> {
  const out = new Map<string, string>();
  if (raw === null || raw.trim() === '') return out;
  for (const pair of raw.split(',')) {
    const [name, value, extra] = pair.trim().split(' ');
    if (!name || extra !== undefined || !/^[\x21-\x7e]+$/.test(name)) throw new MetadataError('each pair must be `name base64(value)`');
    if (out.has(name)) throw new MetadataError(`${name} given twice`);
    let text = '';
    if (value !== undefined && value !== '') {
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(fromBase64(value));
      } catch {
        throw new MetadataError(`${name}: not base64 of UTF-8 text`);
      }
    }
    out.set(name, text);
  }
  return out;
}

/** A malformed `Upload-Metadata` (answered 400 by the route). */
export class MetadataError extends Error {}
