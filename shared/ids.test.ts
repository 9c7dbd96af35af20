import { describe, expect, it } from 'vitest';
import { ID_PATTERNS, newId, newRequestId, randomHex } from './ids.ts';

describe('identifiers', () => {
  it.each(['prj', 'obj', 'snap', 'acct', 'rcpt', 'agt'] as const)('issues %s ids that match their pattern', (prefix) => {
    for (let i = 0; i < 50; i++) expect(newId(prefix)).toMatch(ID_PATTERNS[prefix]);
  });

  it('matches the contract patterns exactly', () => {
    expect(ID_PATTERNS.prj.source).toBe('^prj_[0-9a-f]{16}$');
    expect(ID_PATTERNS.obj.source).toBe('^obj_[0-9a-f]{16}$');
    expect(ID_PATTERNS.snap.source).toBe('^snap_[0-9a-f]{16}$');
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
