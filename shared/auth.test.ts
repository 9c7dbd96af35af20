import { describe, expect, it } from 'vitest';
import {
  constantTimeEqual,
  issueInternalToken,
  issueSessionToken,
  newProjectKey,
  parseBearer,
  parseProjectKey,
  verifierOf,
  verifyInternalToken,
  verifySecret,
  verifySessionToken,
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
  it('round-trip the account id', async () => {
    const { token, expiresAt } = await issueSessionToken(SECRET, 'acct_0123456789abcdef', 3600);
    expect(await verifySessionToken(SECRET, token)).toBe('acct_0123456789abcdef');
    expect(expiresAt.getTime()).toBeGreaterThan(Date.now());
  });

  it('refuse an expired token', async () => {
    const { token } = await issueSessionToken(SECRET, 'acct_0123456789abcdef', 60, Date.now() - 3600_000);
    await expect(verifySessionToken(SECRET, token)).rejects.toMatchObject({ code: 'authentication_required' });
  });

  it('refuse a token signed with another secret, or tampered', async () => {
    const { token } = await issueSessionToken(SECRET, 'acct_0123456789abcdef', 60);
    await expect(verifySessionToken('y'.repeat(64), token)).rejects.toMatchObject({ code: 'authentication_required' });
    const tampered = token.slice(0, -2) + (token.endsWith('AA') ? 'BB' : 'AA');
    await expect(verifySessionToken(SECRET, tampered)).rejects.toMatchObject({ code: 'authentication_required' });
  });

  it('are not accepted as internal tokens, nor the reverse', async () => {
    const { token } = await issueSessionToken(SECRET, 'acct_0123456789abcdef', 60);
    await expect(verifyInternalToken(SECRET, token)).rejects.toMatchObject({ code: 'authentication_required' });
    const internal = await issueInternalToken(SECRET);
    await expect(verifySessionToken(SECRET, internal)).rejects.toMatchObject({ code: 'authentication_required' });
    await expect(verifyInternalToken(SECRET, internal)).resolves.toBeUndefined();
  });
});
