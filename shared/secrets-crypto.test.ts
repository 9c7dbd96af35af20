import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigError } from './config.ts';
import { keyRingOf, openSecret, parseKeyRing, sealSecret, SecretDecryptError, type KeyRing } from './secrets-crypto.ts';

const b64 = (n = 32) => randomBytes(n).toString('base64');
const P1 = 'prj_0123456789abcdef';
const P2 = 'prj_fedcba9876543210';

function ring(spec: string): KeyRing {
  const r = parseKeyRing({ SVCD_SECRETS_KEYS: spec, SVCD_SECRETS_KEY: undefined });
  if (!r) throw new Error('no ring');
  return r;
}

function configProblem(settings: { SVCD_SECRETS_KEYS?: string; SVCD_SECRETS_KEY?: string }): string {
  try {
    parseKeyRing({ SVCD_SECRETS_KEYS: undefined, SVCD_SECRETS_KEY: undefined, ...settings });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('key ring settings', () => {
  it('make the first key of SVCD_SECRETS_KEYS active and keep the others for decryption', () => {
    const r = ring(`new:${b64()}, old:${b64()}`);
    expect(r.activeId).toBe('new');
    expect(r.ids).toEqual(['new', 'old']);
  });

  it('accept SVCD_SECRETS_KEY as a one-key shorthand with the id "default", or with an explicit id', () => {
    expect(parseKeyRing({ SVCD_SECRETS_KEY: b64(), SVCD_SECRETS_KEYS: undefined })?.activeId).toBe('default');
    expect(parseKeyRing({ SVCD_SECRETS_KEY: `k9:${b64()}`, SVCD_SECRETS_KEYS: undefined })?.activeId).toBe('k9');
  });

  it('accept URL-safe base64 and keys without padding', () => {
    const key = randomBytes(32);
    expect(ring(`a:${key.toString('base64url')}`).activeId).toBe('a');
    expect(ring(`a:${key.toString('base64').replace(/=+$/, '')}`).activeId).toBe('a');
  });

  it('answer null when neither setting is present: secrets are then unavailable', () => {
    expect(parseKeyRing({ SVCD_SECRETS_KEYS: undefined, SVCD_SECRETS_KEY: undefined })).toBeNull();
  });

  it.each([
    ['a key that is not 32 bytes', { SVCD_SECRETS_KEYS: `k1:${b64(16)}` }, /^invalid setting SVCD_SECRETS_KEYS: key "k1" must be 32 bytes/],
    ['a key of 33 bytes', { SVCD_SECRETS_KEYS: `k1:${b64(33)}` }, /^invalid setting SVCD_SECRETS_KEYS: key "k1" must be 32 bytes/],
    ['a key that is not base64', { SVCD_SECRETS_KEYS: 'k1:not base64!' }, /^invalid setting SVCD_SECRETS_KEYS: key "k1" is not valid base64$/],
    ['a duplicated id', { SVCD_SECRETS_KEYS: `k1:${b64()},k1:${b64()}` }, /^invalid setting SVCD_SECRETS_KEYS: key id "k1" appears twice$/],
    ['an entry without an id', { SVCD_SECRETS_KEYS: b64() }, /^invalid setting SVCD_SECRETS_KEYS: entry 1 must be id:base64key$/],
    ['an empty entry', { SVCD_SECRETS_KEYS: `k1:${b64()},` }, /^invalid setting SVCD_SECRETS_KEYS: entry 2 is empty$/],
    ['a bad id', { SVCD_SECRETS_KEYS: `k 1:${b64()}` }, /^invalid setting SVCD_SECRETS_KEYS: entry 1 has an invalid key id/],
    ['a short single key', { SVCD_SECRETS_KEY: b64(31) }, /^invalid setting SVCD_SECRETS_KEY: key "default" must be 32 bytes/],
    ['several keys in the single-key setting', { SVCD_SECRETS_KEY: `a:${b64()},b:${b64()}` }, /^invalid setting SVCD_SECRETS_KEY: must hold one key/],
    ['both settings at once', { SVCD_SECRETS_KEY: b64(), SVCD_SECRETS_KEYS: `k1:${b64()}` }, /not both/],
  ])('refuse %s, naming the setting', (_what, settings, pattern) => {
    expect(configProblem(settings)).toMatch(pattern);
  });

  it('never quote key material in a refusal', () => {
    const key = b64(31);
    for (const spec of [`k1:${key}`, key, `${key},`]) {
      expect(configProblem({ SVCD_SECRETS_KEYS: spec })).not.toContain(key.slice(0, 12));
    }
  });
});

describe('seal and open', () => {
  const r = ring(`k1:${b64()}`);

  it('round-trip any UTF-8 value, the empty one included', async () => {
    for (const value of ['hunter2', '', 'é☃𝄞 multi\nline', 'x'.repeat(4096)]) {
      expect(await openSecret(r, P1, 'API_KEY', await sealSecret(r, P1, 'API_KEY', value))).toBe(value);
    }
  });

  it('record the active key id and never hold the value in clear', async () => {
    const value = 'distinctive-plaintext-value';
    const sealed = await sealSecret(r, P1, 'API_KEY', value);
    expect(sealed.key_id).toBe('k1');
    expect(Buffer.from(sealed.nonce, 'base64')).toHaveLength(12);
    // GCM: ciphertext is as long as the plaintext plus a 16-byte tag.
    const ct = Buffer.from(sealed.ciphertext, 'base64');
    expect(ct).toHaveLength(value.length + 16);
    expect(ct.includes(Buffer.from(value))).toBe(false);
    expect(JSON.stringify(sealed)).not.toContain(value);
  });

  it('use a fresh nonce for every write', async () => {
    const a = await sealSecret(r, P1, 'API_KEY', 'same');
    const b = await sealSecret(r, P1, 'API_KEY', 'same');
    expect(a.nonce).not.toBe(b.nonce);
    expect(a.ciphertext).not.toBe(b.ciphertext);
  });

  it('refuse a ciphertext moved to another project or another name', async () => {
    const sealed = await sealSecret(r, P1, 'API_KEY', 'v');
    await expect(openSecret(r, P2, 'API_KEY', sealed)).rejects.toThrow(SecretDecryptError);
    await expect(openSecret(r, P1, 'OTHER_KEY', sealed)).rejects.toThrow(SecretDecryptError);
  });

  it('refuse an altered ciphertext or nonce', async () => {
    const sealed = await sealSecret(r, P1, 'API_KEY', 'value');
    const ct = Buffer.from(sealed.ciphertext, 'base64');
    ct[0]! ^= 1;
    await expect(openSecret(r, P1, 'API_KEY', { ...sealed, ciphertext: ct.toString('base64') })).rejects.toThrow(SecretDecryptError);
    const other = await sealSecret(r, P1, 'API_KEY', 'value');
    await expect(openSecret(r, P1, 'API_KEY', { ...sealed, nonce: other.nonce })).rejects.toThrow(SecretDecryptError);
    await expect(openSecret(r, P1, 'API_KEY', { ...sealed, nonce: 'AAAA' })).rejects.toThrow(/malformed/);
  });

  it('keep old ciphertexts readable after the master key is rotated, and seal new ones with the new key', async () => {
    const k1 = b64();
    const before = ring(`k1:${k1}`);
    const old = await sealSecret(before, P1, 'API_KEY', 'old value');
    const after = ring(`k2:${b64()},k1:${k1}`);
    expect(await openSecret(after, P1, 'API_KEY', old)).toBe('old value');
    const fresh = await sealSecret(after, P1, 'API_KEY', 'new value');
    expect(fresh.key_id).toBe('k2');
    await expect(openSecret(before, P1, 'API_KEY', fresh)).rejects.toThrow(/key id "k2", which is not in the key ring/);
  });

  it('refuse a ciphertext whose key id is reused for a different key', async () => {
    const sealed = await sealSecret(r, P1, 'API_KEY', 'v');
    const impostor = keyRingOf([{ id: 'k1', bytes: new Uint8Array(randomBytes(32)) }]);
    await expect(openSecret(impostor, P1, 'API_KEY', sealed)).rejects.toThrow(SecretDecryptError);
  });

  it('never put the value into a decryption error', async () => {
    const value = 'do-not-leak-this-value';
    const sealed = await sealSecret(r, P1, 'API_KEY', value);
    const err = await openSecret(r, P2, 'API_KEY', sealed).catch((e: Error) => e);
    expect(String((err as Error).stack)).not.toContain(value);
    expect((err as Error).message).toContain('API_KEY');
  });
});
