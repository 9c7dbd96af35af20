/**
 * Sealed list cursors (docs/api.md "Decisions"). What the repository hands out to resume a list
 * (shared/db/pagination.ts: the JSON of a DynamoDB key) leaves the service only encrypted and
 * authenticated: AES-256-GCM (NIST SP 800-38D) under a key derived with HKDF-SHA256 (RFC 5869) from
 * `SVCD_SESSION_SECRET`, with the list it belongs to (kind, project or account, bucket) as
 * additional data. A client reads nothing in a cursor (no table key, no account id), and one that
 * was altered, forged, or taken to another list fails to open: 400 `cursor: is not valid`.
 *
 * Web Crypto only (`crypto.subtle`): the handlers run in workerd too.
 */
import { errors } from './errors.ts';
import { fromBase64, toBase64Url } from './base64.ts';

/** Seals and opens the cursors of the lists; built once per isolate (handlers/deps.ts). */
export interface CursorSeal {
  /** Seals `inner` for the list named by `list` (its parts: kind and ids). */
  seal(list: readonly string[], inner: string): Promise<string>;
  /** Opens a cursor of the list `list`; anything else is 400 `cursor: is not valid`. */
  open(list: readonly string[], sealed: string): Promise<string>;
}

/** Format byte leading every sealed cursor: a later format can tell its own apart. */
const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const utf8 = new TextEncoder();

function fromBase64Url(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return null;
  const bytes = fromBase64(text);
  // Only the canonical text of those bytes (RFC 4648 §3.5): a last character whose unused bits
  // differ would otherwise decode to the same cursor.
  return toBase64Url(bytes) === text ? bytes : null;
}

/** The additional data of a list: unambiguous, since no part holds a NUL. */
function aadOf(list: readonly string[]): Uint8Array<ArrayBuffer> {
  return utf8.encode(`svc-cloud list cursor\0${list.join('\0')}`);
}

/**
 * A key for one purpose, derived from a service secret with HKDF-SHA256 (RFC 5869): salt
 * `svc-cloud`, `info` naming the purpose, so keys of different purposes (list cursors, signed
 * download URLs) are independent of each other and of the secret's own use. Not extractable.
 */
export async function deriveServiceKey(
  secret: string,
  info: string,
  algorithm: AesKeyGenParams | HmacImportParams,
  usages: KeyUsage[],
): Promise<CryptoKey> {
  const ikm = await crypto.subtle.importKey('raw', utf8.encode(secret), 'HKDF', false, ['deriveKey']);
  return crypto.subtle.deriveKey({ name: 'HKDF', hash: 'SHA-256', salt: utf8.encode('svc-cloud'), info: utf8.encode(info) }, ikm, algorithm, false, usages);
}

function deriveKey(secret: string): Promise<CryptoKey> {
  return deriveServiceKey(secret, 'list cursor v1', { name: 'AES-GCM', length: 256 }, ['encrypt', 'decrypt']);
}

/** The 400 of every cursor that does not open, whatever the reason: nothing to tell apart. */
export function invalidCursor() {
  return errors.invalid('cursor: is not valid');
}

/** A cursor seal keyed from `secret` (the session secret); the key is derived on first use. */
export function cursorSeal(secret: string): CursorSeal {
  let key: Promise<CryptoKey> | undefined;
  const keyOf = () => (key ??= deriveKey(secret));
  return {
    async seal(list, inner) {
      const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
      const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: 'AES-GCM', iv, additionalData: aadOf(list) }, await keyOf(), utf8.encode(inner)));
      const out = new Uint8Array(1 + IV_BYTES + sealed.byteLength);
      out[0] = VERSION;
      out.set(iv, 1);
      out.set(sealed, 1 + IV_BYTES);
      return toBase64Url(out);
    },
    async open(list, text) {
      const bytes = fromBase64Url(text);
      if (!bytes || bytes.byteLength < 1 + IV_BYTES + TAG_BYTES || bytes[0] !== VERSION) throw invalidCursor();
      let plain: ArrayBuffer;
      try {
        plain = await crypto.subtle.decrypt(
          { name: 'AES-GCM', iv: bytes.slice(1, 1 + IV_BYTES), additionalData: aadOf(list) },
          await keyOf(),
          bytes.slice(1 + IV_BYTES),
        );
      } catch {
        throw invalidCursor();
      }
      try {
        return new TextDecoder('utf-8', { fatal: true }).decode(plain);
      } catch {
        throw invalidCursor();
      }
    },
  };
}
