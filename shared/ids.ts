/**
 * Identifier formats of the interface contract ("Identifier conventions") and of docs/api.md
 * "Identifiers", and their generator.
 */

/** Patterns of every identifier the service issues. */
export const ID_PATTERNS = {
  prj: /^prj_[0-9a-f]{16}$/,
  obj: /^obj_[0-9a-f]{16}$/,
  snap: /^snap_[0-9a-f]{16}$/,
  acct: /^acct_[0-9a-f]{16}$/,
  rcpt: /^rcpt_[0-9a-f]{16}$/,
  agt: /^agt_[0-9a-f]{16}$/,
} as const;

/** A project key's id: the 32 lowercase hex digits a `svc1_` key carries (shared/auth.ts). */
export const KEY_ID_PATTERN = /^[0-9a-f]{32}$/;

/** A prefix of an issued identifier. */
export type IdPrefix = keyof typeof ID_PATTERNS;

/** Lowercase hex of `bytes` random bytes from the platform CSPRNG (Web Crypto: workers and Node alike). */
export function randomHex(bytes: number): string {
  const buf = crypto.getRandomValues(new Uint8Array(bytes));
  let out = '';
  for (const b of buf) out += b.toString(16).padStart(2, '0');
  return out;
}

/** A fresh identifier `<prefix>_<16 hex>`. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomHex(8)}`;
}

/** A fresh request id, carried in `X-Request-Id`. */
export function newRequestId(): string {
  return `req_${randomHex(8)}`;
}
