import { describe, expect, it } from 'vitest';
import { ID_PATTERNS, newId, newRequestId, randomHex } from './ids.ts';

describe('identifiers', () => {
  it.each(['prj', 'obj', 'snap', 'acct', 'rcpt', 'agt'] as const)('issues %s ids that match their pattern', (prefix) => {
    for (let i = 0; i < 50; i++) expect(newId(prefix)).toMatch(ID_PATTERNS[prefix]);
  });

  it.each(['prj', 'obj', 'snap'] as const)('accepts %s_ + 16 lowercase hex and nothing near it (the contract)', (prefix) => {
    const pattern = ID_PATTERNS[prefix];
    expect(pattern.test(`${prefix}_0123456789abcdef`)).toBe(true);
    for (const near of [
      `${prefix}_0123456789ABCDEF`,
      `${prefix}_0123456789abcde`,
      `${prefix}_0123456789abcdef0`,
      `${prefix}_0123456789abcdeg`,
      `${prefix}-0123456789abcdef`,
      `${prefix}_0123456789abcdef\n`,
      ` ${prefix}_0123456789abcdef`,
      `x${prefix}_0123456789abcdef`,
    ]) {
      expect(pattern.test(near), JSON.stringify(near)).toBe(false);
    }
  });

  it('does not repeat', () => {
    const seen = new Set(Array.from({ length: 1000 }, () => newId('prj')));
    expect(seen.size).toBe(1000);
  });

  it('makes lowercase hex of the asked length', () => {
    expect(randomHex(16)).toMatch(/^[0-9a-f]{32}$/);
    expect(newRequestId()).toMatch(/^req_[0-9a-f]{16}$/);
  });
});
