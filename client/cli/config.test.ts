/** The CLI's profiles file (client/cli/config.ts): where it lives, its mode, whole writes. */
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { configDir, configPath, loadConfig, updateProfile } from './config.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-cli-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the profiles file', () => {
  it("lives in SVC_CONFIG_DIR, else the platform's configuration directory", () => {
    expect(configDir({ SVC_CONFIG_DIR: '/x/y' })).toBe('/x/y');
    expect(configDir({ HOME: '/h' }, 'linux')).toBe('/h/.config/svc');
    expect(configDir({ HOME: '/h', XDG_CONFIG_HOME: '/xdg' }, 'linux')).toBe('/xdg/svc');
    expect(configDir({ HOME: '/h' }, 'darwin')).toBe('/h/Library/Application Support/svc');
    expect(configDir({ HOME: '/h', APPDATA: 'C:\\Users\\a\\AppData\\Roaming' }, 'win32')).toBe(join('C:\\Users\\a\\AppData\\Roaming', 'svc'));
  });

  it('is readable by its owner only, in a private directory, and written whole', () => {
    const home = join(dir, 'cfg');
    updateProfile(home, 'default', () => ({ base_url: 'http://x', token: 't' }));
    updateProfile(home, 'other', () => ({ base_url: 'http://y' }));
    expect(statSync(configPath(home)).mode & 0o777).toBe(0o600);
    expect(statSync(home).mode & 0o777).toBe(0o700);
    expect(readdirSync(home)).toEqual(['config.json']);
    expect(Object.keys(loadConfig(home).profiles)).toEqual(['default', 'other']);
    updateProfile(home, 'default', () => null);
    expect(Object.keys(loadConfig(home).profiles)).toEqual(['other']);
  });

  it('names a file it cannot read instead of overwriting it', () => {
    const bad = join(dir, 'bad');
    updateProfile(bad, 'default', () => ({ base_url: 'http://x' }));
    writeFileSync(configPath(bad), '{oops');
    expect(() => loadConfig(bad)).toThrow(/config\.json is not valid JSON: fix or remove it/);
  });
});
