/**
 * The agent's internal-token check (./internal-auth.ts): a token the handlers signed passes, and is
 * remembered until it expires; a missing, malformed, foreign or expired one is 401.
 */
import { describe, expect, it, vi } from 'vitest';
import { issueInternalToken } from '../shared/auth.ts';
import { InternalTokens } from './internal-auth.ts';

const SECRET = 'internal-secret-of-at-least-32-characters!!';

describe('InternalTokens', () => {
  it('passes a signed token, and refuses none, a malformed one and one signed with another secret', async () => {
    const tokens = new InternalTokens(SECRET);
    await expect(tokens.check(`Bearer ${await issueInternalToken(SECRET)}`)).resolves.toBeUndefined();
    await expect(tokens.check(undefined)).rejects.toMatchObject({ code: 'authentication_required' });
    await expect(tokens.check('Basic abc')).rejects.toMatchObject({ code: 'authentication_required' });
    await expect(tokens.check(`Bearer ${await issueInternalToken('another-secret-of-at-least-32-characters')}`)).rejects.toMatchObject({
      code: 'authentication_required',
    });
  });

  it('remembers a verified token until its expiry, then refuses it', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const tokens = new InternalTokens(SECRET);
      const token = `Bearer ${await issueInternalToken(SECRET, 'handlers', 30)}`;
      await tokens.check(token);
      vi.setSystemTime(Date.now() + 29_000);
      await expect(tokens.check(token)).resolves.toBeUndefined();
      vi.setSystemTime(Date.now() + 2_000);
      await expect(tokens.check(token)).rejects.toMatchObject({ code: 'authentication_required' });
    } finally {
      vi.useRealTimers();
    }
  });
});
