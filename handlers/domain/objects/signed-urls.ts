/**
 * Signed download URLs (docs/storage.md "Signed URLs"), as Supabase's signed URLs and S3's presigned
 * GETs: `<object path>?expires=<unix seconds>&signature=<base64url>` reads one object without a
 * session until `expires`. The signature is HMAC-SHA256 (RFC 2104) over the method, the object's
 * canonical path (tickets.ts `objectPath`, rebuilt from the decoded request path, so any equivalent
 * encoding of it verifies) and the expiry, under a key derived from `SVCD_SESSION_SECRET` with HKDF
 * for this purpose alone (shared/cursors.ts `deriveServiceKey`). Compared in constant time.
 *
 * Web Crypto only (`crypto.subtle`): the handlers run in workerd too.
 */
import { constantTimeEqual } from '../../../shared/auth.ts';
import { deriveServiceKey } from '../../../shared/cursors.ts';
import { errors } from '../../../shared/errors.ts';
import { toBase64Url } from '../../../shared/base64.ts';

/** The query parameters of a signed URL. */
export const SIGNED_URL_PARAMS = ['expires', 'signature'] as const;

const SIGNATURE = /^[A-Za-z0-9_-]{43}$/;
/** Unix seconds in their one canonical form (no leading zero), so no two texts name one expiry. */
const EXPIRES = /^(0|[1-9]\d{0,11})$/;
const utf8 = new TextEncoder();

/** Signing keys by secret, derived once per isolate (as shared/auth.ts keeps its HMAC keys). */
const signingKeys = new Map<string, Promise<CryptoKey>>();

function signingKey(secret: string): Promise<CryptoKey> {
  let key = signingKeys.get(secret);
  if (!key) {
    key = deriveServiceKey(secret, 'signed download url v1', { name: 'HMAC', hash: 'SHA-256', length: 256 }, ['sign']);
    signingKeys.set(secret, key);
  }
  return key;
}

/** The signature of `method path` until `expires` (unix seconds): base64url HMAC-SHA256, 43 characters. */
export async function urlSignature(secret: string, method: string, path: string, expires: number): Promise<string> {
  // One field per line; none can hold a newline (a method, a percent-encoded path, digits).
  const text = `svc-cloud signed url v1\n${method}\n${path}\n${expires}`;
  return toBase64Url(new Uint8Array(await crypto.subtle.sign('HMAC', await signingKey(secret), utf8.encode(text))));
}

/** `path` signed for `method` until `expires` (unix seconds), as a path with its query. */
export async function signedUrl(secret: string, method: string, path: string, expires: number): Promise<string> {
  return `${path}?expires=${expires}&signature=${await urlSignature(secret, method, path, expires)}`;
}

/**
 * Checks a signed URL's `expires` and `signature` (each as given, absent when null) for `method`
 * on `path` at `nowMs`. Anything but a valid, unexpired signature is 401: the signature is the
 * request's credential (the interface contract "Authentication"). The answer never says which
 * part differed.
 */
export async function verifySignedUrl(
  secret: string,
  method: string,
  path: string,
  given: { expires: string | null; signature: string | null },
  nowMs: number,
): Promise<void> {
  const { expires, signature } = given;
  if (expires === null || signature === null) throw errors.unauthenticated('a signed URL needs both expires and signature');
  if (!EXPIRES.test(expires) || !SIGNATURE.test(signature)) throw errors.unauthenticated('the signed URL is not valid');
  const expected = await urlSignature(secret, method, path, Number(expires));
  if (!constantTimeEqual(expected, signature)) throw errors.unauthenticated('the signed URL is not valid');
  if (nowMs >= Number(expires) * 1000) throw errors.unauthenticated(`the signed URL expired at ${new Date(Number(expires) * 1000).toISOString()}`);
}
