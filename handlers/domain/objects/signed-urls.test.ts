/** Signed download URLs on plain values: what verifies, and that every altered byte or a passed expiry does not. */
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../../shared/errors.ts';
import { signedUrl, urlSignature, verifySignedUrl } from './signed-urls.ts';

const SECRET = 's'.repeat(40);
const PATH = '/v0/projects/prj_0123456789abcdef/storage/objects/b1/dir/a%20b.txt';
const NOW = Date.UTC(2026, 4, 1, 12, 0, 0);
const EXPIRES = NOW / 1000 + 600;

/** The refusal of a check as `status message`, or `ok`. */
async function outcome(check: Promise<void>): Promise<string> {
  try {
    await check;
    return 'ok';
  } catch (err) {
    if (err instanceof ServiceError) return `${err.status} ${err.message}`;
    throw err;
  }
}

/** One byte of `text` at `i` changed to another URL-safe character. */
function flip(text: string, i: number): string {
  const c = text[i] === 'A' ? 'B' : 'A';
  return text.slice(0, i) + c + text.slice(i + 1);
}

describe('signed URLs', () => {
  it('verify for the method, path and expiry they were made for, until the expiry', async () => {
    const url = await signedUrl(SECRET, 'GET', PATH, EXPIRES);
    const q = new URL(url, 'http://svc.test').searchParams;
    expect(url.startsWith(`${PATH}?expires=${EXPIRES}&signature=`)).toBe(true);
    expect(q.get('signature')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const given = { expires: q.get('expires'), signature: q.get('signature') };
    expect(await outcome(verifySignedUrl(SECRET, 'GET', PATH, given, NOW))).toBe('ok');
    expect(await outcome(verifySignedUrl(SECRET, 'GET', PATH, given, EXPIRES * 1000 - 1))).toBe('ok');
  });

  it('are refused (401) at and after the expiry', async () => {
    const signature = await urlSignature(SECRET, 'GET', PATH, EXPIRES);
    for (const at of [EXPIRES * 1000, EXPIRES * 1000 + 1, EXPIRES * 1000 + 86_400_000]) {
      expect(await outcome(verifySignedUrl(SECRET, 'GET', PATH, { expires: String(EXPIRES), signature }, at))).toMatch(/^401 the signed URL expired at /);
    }
  });

  it('are refused when any one byte of the signature, the expiry or the path changes', async () => {
    const signature = await urlSignature(SECRET, 'GET', PATH, EXPIRES);
    const expires = String(EXPIRES);
    for (let i = 0; i < signature.length; i++) {
      expect(await outcome(verifySignedUrl(SECRET, 'GET', PATH, { expires, signature: flip(signature, i) }, NOW)), `signature byte ${i}`).toMatch(/^401 /);
    }
    for (let i = 0; i < expires.length; i++) {
      const other = expires.slice(0, i) + String((Number(expires[i]) + 1) % 10) + expires.slice(i + 1);
      expect(await outcome(verifySignedUrl(SECRET, 'GET', PATH, { expires: other, signature }, NOW)), `expires byte ${i}`).toMatch(/^401 /);
    }
    for (let i = 0; i < PATH.length; i++) {
      expect(await outcome(verifySignedUrl(SECRET, 'GET', flip(PATH, i), { expires, signature }, NOW)), `path byte ${i}`).toMatch(/^401 /);
    }
  });

  it('are refused for another method, under another secret, and with a non-canonical or missing part', async () => {
    const signature = await urlSignature(SECRET, 'GET', PATH, EXPIRES);
    const expires = String(EXPIRES);
    expect(await outcome(verifySignedUrl(SECRET, 'PUT', PATH, { expires, signature }, NOW))).toMatch(/^401 /);
    expect(await outcome(verifySignedUrl('t'.repeat(40), 'GET', PATH, { expires, signature }, NOW))).toMatch(/^401 /);
    for (const given of [
      { expires: `0${expires}`, signature },
      { expires: ` ${expires}`, signature },
      { expires: `${expires}.0`, signature },
      { expires, signature: `${signature}=` },
      { expires: null, signature },
      { expires, signature: null },
    ]) {
      expect(await outcome(verifySignedUrl(SECRET, 'GET', PATH, given, NOW)), JSON.stringify(given)).toMatch(/^401 /);
    }
  });
});
