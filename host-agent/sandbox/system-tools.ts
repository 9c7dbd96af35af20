/**
 * System tools (util-linux `setpriv`, `unshare`, `umount`) as every sandboxed process of the agent
 * finds them: one lookup for engines and function runtimes alike, at an absolute path from a fixed
 * list of system directories, never the agent's PATH (no module reads the environment).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** Where system tools are looked for. */
const SYSTEM_PATH = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

/** The absolute path of a system tool, or null when it is not installed. */
export function systemTool(name: string): string | null {
  for (const dir of SYSTEM_PATH) {
    const path = join(dir, name);
    if (existsSync(path)) return path;
  }
  return null;
}
