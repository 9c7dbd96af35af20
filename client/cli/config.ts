/**
 * The CLI's profiles (docs/cli.md "Credentials"): base URL, account id and secret, the current
 * session, and the project keys the CLI minted for `svc sql`, in one JSON file readable by its owner
 * only (mode 0600, its directory 0700), written whole to a temporary file and renamed into place so a
 * crash never leaves half a file.
 */
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** One profile. */
export interface Profile {
  base_url: string;
  account_id?: string;
  /** Kept so an expired session can be renewed (`svc logout` removes it). */
  account_secret?: string;
  token?: string;
  expires_at?: string;
  /** Project keys the CLI issued for itself, by project id. */
  keys?: Record<string, string>;
}

/** The file. */
export interface ConfigFile {
  profiles: Record<string, Profile>;
}

/** The name of the profile used when none is chosen. */
export const DEFAULT_PROFILE = 'default';

/**
 * The configuration directory: `$SVC_CONFIG_DIR`, else the platform's (XDG on Linux,
 * Application Support on macOS, %APPDATA% on Windows), in a `svc` folder.
 */
export function configDir(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): string {
  if (env.SVC_CONFIG_DIR) return env.SVC_CONFIG_DIR;
  const home = env.HOME || homedir();
  if (platform === 'win32') return join(env.APPDATA || join(home, 'AppData', 'Roaming'), 'svc');
  if (platform === 'darwin') return join(home, 'Library', 'Application Support', 'svc');
  return join(env.XDG_CONFIG_HOME || join(home, '.config'), 'svc');
}

/** The profiles file inside `dir`. */
export function configPath(dir: string): string {
  return join(dir, 'config.json');
}

/** Reads the profiles (none yet: an empty file). A file that is not ours is an error naming it. */
export function loadConfig(dir: string): ConfigFile {
  const path = configPath(dir);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { profiles: {} };
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`${path} is not valid JSON: fix or remove it`);
  }
  const profiles = (parsed as ConfigFile | null)?.profiles;
  if (!profiles || typeof profiles !== 'object') throw new Error(`${path} has no "profiles" object: fix or remove it`);
  return { profiles };
}

/** Writes the profiles whole: a temporary file (mode 0600) renamed over the old one. */
export function saveConfig(dir: string, config: ConfigFile): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = configPath(dir);
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  // A file made before under a looser umask is tightened too.
  chmodSync(temp, 0o600);
  renameSync(temp, path);
}

/** Replaces one profile by what `change` makes of it (undefined when absent; null removes it) and saves the file. */
export function updateProfile(dir: string, name: string, change: (profile: Profile | undefined) => Profile | null): Profile | null {
  const config = loadConfig(dir);
  const current = config.profiles[name];
  const next = change(current ? { ...current } : undefined);
  if (next) config.profiles[name] = next;
  else delete config.profiles[name];
  saveConfig(dir, config);
  return next;
}
