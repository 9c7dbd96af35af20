import { describe, expect, it } from 'vitest';
import { ConfigError, enginePortRange, inviteCodes, loadSettings } from './config.ts';

const secrets = { SVCD_SESSION_SECRET: 'a'.repeat(32), SVCD_KEY_PEPPER: 'b'.repeat(32), SVCD_INTERNAL_SECRET: 'c'.repeat(32) };

describe('settings', () => {
  it('apply the documented defaults', () => {
    const s = loadSettings(secrets);
    expect(s.SVCD_PORT).toBe(8787);
    expect(s.SVCD_JSON_MAX_BYTES).toBe(65536);
    expect(s.SVCD_STORAGE_MAX_BYTES).toBe(32 * 1024 * 1024);
    expect(s.SVCD_SESSION_TTL).toBe(86400);
    expect(enginePortRange(s)).toEqual([20000, 20999]);
  });

  it('name a missing secret in one line', () => {
    expect(() => loadSettings({ ...secrets, SVCD_KEY_PEPPER: undefined })).toThrow(/^invalid setting SVCD_KEY_PEPPER: is required$/);
  });

  it('name an invalid value', () => {
    expect(() => loadSettings({ ...secrets, SVCD_PORT: 'eighty' })).toThrow(ConfigError);
    expect(() => loadSettings({ ...secrets, SVCD_PORT: 'eighty' })).toThrow(/SVCD_PORT/);
    expect(() => loadSettings({ ...secrets, SVCD_BLOB_BACKEND: 'ftp' })).toThrow(/SVCD_BLOB_BACKEND/);
  });

  it('refuse an unknown SVCD_ setting rather than ignore a typo', () => {
    expect(() => loadSettings({ ...secrets, SVCD_PROT: '1' })).toThrow(/unknown setting SVCD_PROT/);
  });

  it('ignore variables that are not settings', () => {
    expect(() => loadSettings({ ...secrets, PATH: '/bin', HOME: '/root' })).not.toThrow();
  });

  it('split invite codes', () => {
    expect(inviteCodes(loadSettings({ ...secrets, SVCD_INVITE_CODES: ' a, b ,,c' }))).toEqual(['a', 'b', 'c']);
  });
});
