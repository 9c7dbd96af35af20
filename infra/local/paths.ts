/** Where the repository is, for the local stack's child processes. */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The pinned Node 24 (DESIGN §7), or the running one. */
export const NODE_BIN = process.execPath;
