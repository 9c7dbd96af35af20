/** Where the repository is, for the local stack's child processes. */
import { chmodSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The Node running the stack (the repository pins Node 24, docs/deploy.md): every child runs on it. */
export const NODE_BIN = process.execPath;

/**
 * Gives others search permission (never read) on each directory above the repository that lacks it,
 * when the stack runs as root: its engines run as their own unprivileged user (docs/lifecycle.md
 * "Engine isolation") and must reach the engine program and Node inside the repository, which a
 * clone under a private directory (`/root`, `mktemp -d`) would deny them. Answers the directories
 * opened, for the caller to say so. A deployment installs the engine where its user can reach it.
 */
export function openRepositoryToEngines(): string[] {
  if (process.getuid?.() !== 0) return [];
  const opened: string[] = [];
  for (let dir = REPO_ROOT; ; dir = dirname(dir)) {
    const mode = statSync(dir).mode & 0o7777;
    if ((mode & 0o001) === 0) {
      chmodSync(dir, mode | 0o001);
      opened.push(dir);
    }
    if (dirname(dir) === dir) break;
  }
  return opened;
}
