/**
 * Function-secret encryption at rest (docs/secrets.md "Encryption at rest"): AES-256-GCM through Web
 * Crypto, so the same code runs in workerd (handlers) and Node (host agent). A fresh 96-bit nonce per
 * write; the additional authenticated data binds the ciphertext to `project + "\0" + name`, so a
 * ciphertext copied to another project or name fails to decrypt.
 *
 * Keys come from a key ring so operators can rotate the master key: `SVCD_SECRETS_KEYS` holds
 * `id:base64key` pairs separated by commas, the first one active (new writes), the others kept to
 * decrypt older ciphertexts; `SVCD_SECRETS_KEY` is the one-key shorthand (`base64key`, id `default`,
 * or `id:base64key`). Every ciphertext records the id of the key that sealed it.
 *
 * Nothing here ever puts key material or a secret value into an error message.
 */
import { ConfigError, type Settings } from './config.ts';
import { fromBase64, toBase64 } from './base64.ts';

/** AES-256: keys are exactly 32 bytes. */
export const SECRETS_KEY_BYTES = 32;
/** GCM nonce length (96 bits, the size GCM is specified for). */
const NONCE_BYTES = 12;
/** Key ids: short, printable, safe to store and to show in logs. */
const KEY_ID_PATTERN = /^[A-Za-z0-9_.-]{1,32}$/;
/** Standard or URL-safe base64, padding optional. */
const BASE64_PATTERN = /^[A-Za-z0-9+/_-]+={0,2}$/;
/** The id the shorthand `SVCD_SECRETS_KEY=<base64key>` gets. */
export const DEFAULT_KEY_ID = 'default';

/** The master keys of a deployment: one active for new writes, all usable to decrypt. */
export interface KeyRing {
  /** Id of the key that seals new writes (the first of `SVCD_SECRETS_KEYS`). */
  readonly activeId: string;
  /** Every key id, active first. */
  readonly ids: readonly string[];
  /** The AES-GCM key of `id` (imported once, non-extractable), or null when the ring has no such id. */
  key(id: string): Promise<CryptoKey> | null;
}

/** A secret value as stored: base64 ciphertext (with the GCM tag), base64 nonce, and the sealing key's id. */
export interface SealedSecret {
  ciphertext: string;
  nonce: string;
  key_id: string;
}

/** A ciphertext that cannot be opened: unknown key id, or altered, or moved to another project or name. */
export class SecretDecryptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretDecryptError';
  }
}

const encoder = new TextEncoder();

/** The bytes of standard or URL-safe base64, or null when it is not base64. */
function bytesOfBase64(text: string): Uint8Array<ArrayBuffer> | null {
  if (!BASE64_PATTERN.test(text)) return null;
  try {
    return fromBase64(text);
  } catch {
    return null;
  }
}

/** One parsed key: its id and raw bytes. */
interface KeyEntry {
  id: string;
  bytes: Uint8Array<ArrayBuffer>;
}

/**
 * Parses one setting into key entries, or answers the problem (which never quotes key material).
 * `single` is the `SVCD_SECRETS_KEY` form: one key, the id optional.
 */
function parseEntries(value: string, single: boolean): KeyEntry[] | string {
  const parts = value.split(',').map((p) => p.trim());
  if (single && parts.length !== 1) return 'must hold one key (use SVCD_SECRETS_KEYS for several)';
  const entries: KeyEntry[] = [];
  for (const [i, part] of parts.entries()) {
    const where = single ? 'the key' : `entry ${i + 1}`;
    if (part === '') return `${where} is empty`;
    const colon = part.indexOf(':');
    if (colon < 0 && !single) return `${where} must be id:base64key`;
    const id = colon < 0 ? DEFAULT_KEY_ID : part.slice(0, colon).trim();
    const encoded = colon < 0 ? part : part.slice(colon + 1).trim();
    if (!KEY_ID_PATTERN.test(id)) return `${where} has an invalid key id (1 to 32 of A-Z a-z 0-9 _ . -)`;
    const bytes = bytesOfBase64(encoded);
    if (!bytes) return `key "${id}" is not valid base64`;
    if (bytes.byteLength !== SECRETS_KEY_BYTES) {
      return `key "${id}" must be ${SECRETS_KEY_BYTES} bytes of base64 (it decodes to ${bytes.byteLength})`;
    }
    if (entries.some((e) => e.id === id)) return `key id "${id}" appears twice`;
    entries.push({ id, bytes });
  }
  return entries;
}

/**
 * Builds the key ring from settings, validating every key: 32 bytes, well-formed unique ids. Answers
 * null when neither setting is present (function secrets are then unavailable). A bad value throws
 * ConfigError naming the setting; setting both is refused, since which key is active would be a guess.
 */
export function parseKeyRing(settings: Pick<Settings, 'SVCD_SECRETS_KEY' | 'SVCD_SECRETS_KEYS'>): KeyRing | null {
  const ring = settings.SVCD_SECRETS_KEYS;
  const single = settings.SVCD_SECRETS_KEY;
  if (ring !== undefined && single !== undefined) {
    throw new ConfigError('invalid setting SVCD_SECRETS_KEY: set SVCD_SECRETS_KEYS or SVCD_SECRETS_KEY, not both');
  }
  const setting = ring !== undefined ? 'SVCD_SECRETS_KEYS' : 'SVCD_SECRETS_KEY';
  const value = ring ?? single;
  if (value === undefined) return null;
  const entries = parseEntries(value, setting === 'SVCD_SECRETS_KEY');
  if (typeof entries === 'string') throw new ConfigError(`invalid setting ${setting}: ${entries}`);
  return keyRingOf(entries);
}

/** A key ring over raw keys (first active); for tests and tools. Keys are imported lazily, once. */
export function keyRingOf(entries: readonly { id: string; bytes: Uint8Array<ArrayBuffer> }[]): KeyRing {
  if (entries.length === 0) throw new Error('a key ring needs at least one key');
  const raw = new Map(entries.map((e) => [e.id, e.bytes]));
  const imported = new Map<string, Promise<CryptoKey>>();
  return {
    activeId: entries[0]!.id,
    ids: entries.map((e) => e.id),
    key(id) {
      let key = imported.get(id);
      if (!key) {
        const bytes = raw.get(id);
        if (!bytes) return null;
        key = crypto.subtle.importKey('raw', bytes, { name: 'AES-GCM' }, false, ['encrypt', 'decrypt']);
        imported.set(id, key);
      }
      return key;
    },
  };
}

/** The additional authenticated data: `project + "\0" + name` (docs/secrets.md "Encryption at rest"). */
function aadOf(project: string, name: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(`${project}\0${name}`);
}

/** Encrypts `value` for secret `name` of `project` with the ring's active key and a fresh nonce. */
export async function sealSecret(ring: KeyRing, project: string, name: string, value: string): Promise<SealedSecret> {
  const nonce = crypto.getRandomValues(new Uint8Array(NONCE_BYTES));
  const key = await ring.key(ring.activeId)!;
  const ciphertext = await crypto.subtle.encrypt(
    { name: 'AES-GCM', iv: nonce, additionalData: aadOf(project, name), tagLength: 128 },
    key,
    encoder.encode(value),
  );
  return { ciphertext: toBase64(new Uint8Array(ciphertext)), nonce: toBase64(nonce), key_id: ring.activeId };
}

/**
 * Decrypts a sealed value of secret `name` of `project`. Throws SecretDecryptError when the key id is
 * not in the ring, or when the ciphertext was altered or belongs to another project or name.
 */
export async function openSecret(ring: KeyRing, project: string, name: string, sealed: SealedSecret): Promise<string> {
  const key = ring.key(sealed.key_id);
  if (!key) {
    throw new SecretDecryptError(
      `secret ${name} of project ${project} is sealed with key id "${sealed.key_id}", which is not in the key ring`,
    );
  }
  const nonce = bytesOfBase64(sealed.nonce);
  const ciphertext = bytesOfBase64(sealed.ciphertext);
  if (!nonce || nonce.byteLength !== NONCE_BYTES || !ciphertext) {
    throw new SecretDecryptError(`secret ${name} of project ${project} has a malformed ciphertext`);
  }
  let plain: ArrayBuffer;
  try {
    plain = await crypto.subtle.decrypt(
      { name: 'AES-GCM', iv: nonce, additionalData: aadOf(project, name), tagLength: 128 },
      await key,
      ciphertext,
    );
  } catch {
    throw new SecretDecryptError(
      `secret ${name} of project ${project} does not decrypt with key id "${sealed.key_id}": altered, or sealed for another project or name`,
    );
  }
  return new TextDecoder('utf-8', { fatal: true }).decode(plain);
}
