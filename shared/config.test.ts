import { describe, expect, it } from 'vitest';
import { ConfigError, enginePortRange, inviteCodes, loadSettings } from './config.ts';

const secrets = { SVCD_SESSION_SECRET: 'a'.repeat(32), SVCD_KEY_PEPPER: 'b'.repeat(32), SVCD_INTERNAL_SECRET: 'c'.repeat(32) };

describe('settings', () => {
  it('take the default for a setting left unset or empty, and a given value over it', () => {
    const unset = loadSettings(secrets);
    expect(loadSettings({ ...secrets, SVCD_PORT: '' }).SVCD_PORT).toBe(unset.SVCD_PORT);
    expect(loadSettings({ ...secrets, SVCD_PORT: '9000' }).SVCD_PORT).toBe(9000);
    expect(loadSettings({ ...secrets, SVCD_S3_FORCE_PATH_STYLE: '1' }).SVCD_S3_FORCE_PATH_STYLE).toBe(true);
  });

  it('read the engine port range, and refuse one that runs backwards', () => {
    expect(enginePortRange(loadSettings({ ...secrets, SVCD_ENGINE_PORTS: '30000-30009' }))).toEqual([30000, 30009]);
    expect(() => enginePortRange(loadSettings({ ...secrets, SVCD_ENGINE_PORTS: '30009-30000' }))).toThrow(/SVCD_ENGINE_PORTS/);
  });

  it('give engines an unprivileged user, a memory limit, one core and a 30 s statement limit by default; never uid or gid 0', () => {
    const unset = loadSettings(secrets);
    expect(unset.SVCD_ENGINE_UID).toBe(65533);
    expect(unset.SVCD_ENGINE_GID).toBe(65533);
    expect(unset.SVCD_ENGINE_MEMORY_MB).toBe(1024);
    expect(unset.SVCD_ENGINE_CPU_PERCENT).toBe(100);
    expect(unset.SVCD_ENGINE_STATEMENT_TIMEOUT_MS).toBe(30_000);
    expect(() => loadSettings({ ...secrets, SVCD_ENGINE_UID: '0' })).toThrow(/SVCD_ENGINE_UID/);
    expect(() => loadSettings({ ...secrets, SVCD_ENGINE_GID: '0' })).toThrow(/SVCD_ENGINE_GID/);
    expect(loadSettings({ ...secrets, SVCD_ENGINE_CPU_PERCENT: '0' }).SVCD_ENGINE_CPU_PERCENT).toBe(0);
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
