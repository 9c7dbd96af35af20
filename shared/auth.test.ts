import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  constantTimeEqual,
  issueInternalToken,
  issueSessionToken,
  newProjectKey,
  parseBearer,
  parseProjectKey,
  readSessionToken,
  verifierOf,
  verifyInternalToken,
  verifySecret,
} from './auth.ts';
import { ServiceError } from './errors.ts';

const SECRET = 'x'.repeat(64);

function headers(...values: string[]): Headers {
  const h = new Headers();
  for (const v of values) h.append('authorization', v);
  return h;
}

function expect401(fn: () => unknown) {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('authentication_required');
    return;
  }
  throw new Error('expected 401');
}

describe('Authorization parsing (docs/api.md "Credentials")', () => {
  it('accepts one Bearer token, scheme in any case', () => {
    expect(parseBearer(headers('Bearer abc.def'))).toBe('abc.def');
    expect(parseBearer(headers('bearer abc'))).toBe('abc');
    expect(parseBearer(headers('BEARER abc'))).toBe('abc');
  });

  it.each([
    ['missing', []],
    ['empty', ['']],
    ['no token', ['Bearer ']],
    ['wrong scheme', ['Basic abc']],
    ['two tokens', ['Bearer a b']],
    ['comma', ['Bearer a,b']],
  ])('refuses %s with 401', (_name, values) => {
    expect401(() => parseBearer(headers(...values)));
  });

  it('refuses two Authorization headers (fetch folds them into "a, b")', () => {
    expect401(() => parseBearer(headers('Bearer a', 'Bearer a')));
  });
});

describe('project keys', () => {
  it('issues keys of the contract form and splits them', () => {
    const k = newProjectKey();
    expect(k.key).toMatch(/^svc1_[0-9a-f]{32}_[0-9a-f]{64}$/);
    expect(parseProjectKey(k.key)).toEqual({ keyId: k.keyId, secret: k.secret });
  });

  it('refuses near misses', () => {
    const k = newProjectKey().key;
    expect(parseProjectKey(k.toUpperCase())).toBeNull();
    expect(parseProjectKey(k + '0')).toBeNull();
    expect(parseProjectKey(k.replace('svc1_', 'svc2_'))).toBeNull();
  });
});

describe('verifiers', () => {
  it('verify the right secret and refuse a wrong one', async () => {
    const v = await verifierOf('pepper', 'secret');
    expect(v).toMatch(/^[0-9a-f]{64}$/);
    expect(v).not.toContain('secret');
    expect(await verifySecret('pepper', 'secret', v)).toBe(true);
    expect(await verifySecret('pepper', 'secreT', v)).toBe(false);
    expect(await verifySecret('other', 'secret', v)).toBe(false);
  });

  it('compare strings exactly', () => {
    expect(constantTimeEqual('abc', 'abc')).toBe(true);
    expect(constantTimeEqual('abc', 'abd')).toBe(false);
    expect(constantTimeEqual('abc', 'abcd')).toBe(false);
  });
});

describe('session tokens', () => {
  it('round-trip the account id, a fresh session id and the session generation', async () => {
    const { token, expiresAt, sessionId } = await issueSessionToken(SECRET, 'acct_0123456789abcdef', 3600, Date.now(), 7);
    expect(await readSessionToken(SECRET, token)).toEqual({
      accountId: 'acct_0123456789abcdef',
      sessionId,
      generation: 7,
      expiresAt: expiresAt.getTime() / 1000,
    });
    expect(sessionId).toMatch(/^[0-9a-f]{32}$/);
    expect((await issueSessionToken(SECRET, 'acct_0123456789abcdef', 3600)).sessionId).not.toBe(sessionId);
    expect(expiresAt.getTime()).toBeGreaterThan(Date.now());
  });

  it('refuse a well-signed token without a session id or a whole generation (one issued before sessions could end)', async () => {
    const signed = (claims: Record<string, unknown>, jti?: string) => {
      const jwt = new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setSubject('acct_0123456789abcdef');
      jwt.setIssuer('svc-cloud').setAudience('svc-session').setExpirationTime('1h');
      return (jti ? jwt.setJti(jti) : jwt).sign(new TextEncoder().encode(SECRET));
    };
    expect((await readSessionToken(SECRET, await signed({ gen: 0 }, '0'.repeat(32)))).generation).toBe(0);
    for (const token of [await signed({}), await signed({ gen: 0 }), await signed({}, '0'.repeat(32)), await signed({ gen: -1 }, '0'.repeat(32)), await signed({ gen: 0 }, 'x')]) {
      await expect(readSessionToken(SECRET, token)).rejects.toMatchObject({ code: 'authentication_required' });
    }
  });

  it('refuse an expired token', async () => {
    const { token } = await issueSessionToken(SECRET, 'acct_0123456789abcdef', 60, Date.now() - 3600_000);
    await expect(readSessionToken(SECRET, token)).rejects.toMatchObject({ code: 'authentication_required' });
  });

  it('refuse a token signed with another secret, or tampered', async () => {
    const { token } = await issueSessionToken(SECRET, 'acct_0123456789abcdef', 60);
    await expect(readSessionToken('y'.repeat(64), token)).rejects.toMatchObject({ code: 'authentication_required' });
    const tampered = token.slice(0, -2) + (token.endsWith('AA') ? 'BB' : 'AA');
    await expect(readSessionToken(SECRET, tampered)).rejects.toMatchObject({ code: 'authentication_required' });
  });

  it('once verified, are judged by their lifetime alone: refused from their expiry on, and never under another secret', async () => {
    const issued = Date.now();
    const { token, expiresAt } = await issueSessionToken(SECRET, 'acct_0123456789abcdef', 60, issued);
    const claims = await readSessionToken(SECRET, token, issued);
    expect(await readSessionToken(SECRET, token, expiresAt.getTime() - 1)).toEqual(claims);
    await expect(readSessionToken(SECRET, token, expiresAt.getTime())).rejects.toMatchObject({ code: 'authentication_required' });
    await expect(readSessionToken('y'.repeat(64), token, issued)).rejects.toMatchObject({ code: 'authentication_required' });
    const tampered = token.slice(0, -2) + (token.endsWith('AA') ? 'BB' : 'AA');
    await expect(readSessionToken(SECRET, tampered, issued)).rejects.toMatchObject({ code: 'authentication_required' });
  });

  it('answer each caller its own claims: changing one answer changes no other', async () => {
    const { token } = await issueSessionToken(SECRET, 'acct_0123456789abcdef', 60);
    const first = await readSessionToken(SECRET, token);
    first.accountId = 'acct_ffffffffffffffff';
    expect((await readSessionToken(SECRET, token)).accountId).toBe('acct_0123456789abcdef');
  });

  it('are not accepted as internal tokens, nor the reverse', async () => {
    const { token } = await issueSessionToken(SECRET, 'acct_0123456789abcdef', 60);
    await expect(verifyInternalToken(SECRET, token)).rejects.toMatchObject({ code: 'authentication_required' });
    const internal = await issueInternalToken(SECRET);
    await expect(readSessionToken(SECRET, internal)).rejects.toMatchObject({ code: 'authentication_required' });
    await expect(verifyInternalToken(SECRET, internal)).resolves.toBeUndefined();
  });
});
