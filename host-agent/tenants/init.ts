/**
 * A tenant's first start (docs/lifecycle.md "Starting an engine"): `engine init` builds the data
 * directory under a name of its own beside `data/`, and only a directory whose init succeeded is
 * renamed to `data/`. So `data/` exists exactly when a usable directory does, whatever engine build
 * runs and wherever a crash strikes: an agent killed mid-init (its init may even finish on its own
 * afterwards) leaves at most an `initializing-…` directory, which no engine ever served and the
 * next start sweeps (host-agent/tenants/leftovers.ts).
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomHex } from '../../shared/ids.ts';
import { fsyncPath, renameDurable } from './files.ts';
import { dirStamp, INIT_STAGING_PREFIX, type Layout } from './layout.ts';

/**
 * Runs `init(dir)` (the engine's `init --data-dir dir`) in a fresh staging directory and renames the
 * result to `data/`. The staging directory is made by `privateDir`, the engine user's only
 * (docs/lifecycle.md "Engine isolation"), and the engine builds `data` inside it: it writes nowhere in
 * the agent's own `tenants/<p>/`. The caller holds the project's lock and has seen no `data/`. On
 * failure the staging directory is removed (it never held anything but what init wrote) and the error
 * rethrown.
 */
export async function initDataDir(
  layout: Layout,
  projectId: string,
  now: number,
  privateDir: (dir: string) => void,
  init: (dir: string) => Promise<unknown>,
): Promise<void> {
  const staging = join(layout.tenantDir(projectId), `${INIT_STAGING_PREFIX}${dirStamp(now)}-${randomHex(2)}`);
  const built = join(staging, 'data');
  try {
    privateDir(staging);
    await init(built);
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    throw err;
  }
  // The commit point: a crash before this rename leaves no data/, one after it a complete one.
  renameDurable(built, layout.dataDir(projectId));
  // The tenant's own directory may be new too: its entry must survive a crash of the machine.
  fsyncPath(layout.tenants);
  // Empty now; a crash before this leaves it to the start's sweep of `initializing-…` directories.
  rmSync(staging, { recursive: true, force: true });
}
