/**
 * Base64 (RFC 4648 §4) and base64url (§5) of bytes, for code that runs in workerd and on Node alike:
 * the platform's `btoa`/`atob` (Node 24 has no `Uint8Array.prototype.toBase64` yet). Node-only code
 * uses `Buffer`'s own encodings instead.
 */

/** Bytes per `String.fromCharCode` call: its arguments go on the stack. */
const STEP = 0x8000;

/** Standard base64 of `bytes`, padded. */
export function toBase64(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.byteLength; i += STEP) bin += String.fromCharCode(...bytes.subarray(i, i + STEP));
  return btoa(bin);
}

/** Base64url of `bytes`, unpadded (RFC 4648 §5; JWS, cursors, signatures). */
export function toBase64Url(bytes: Uint8Array): string {
  return toBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/**
 * The bytes of base64 in either alphabet (standard or URL-safe), padding optional. Throws a
 * `DOMException` (`InvalidCharacterError`) on text that is not base64; callers that must refuse
 * other forms (a non-canonical last character, mixed alphabets) check the text themselves.
 */
export function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  const bin = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
