/** Where the repository is, for the local stack's child processes. */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The Node running the stack (the repository pins Node 24, docs/deploy.md): every child runs on it. */
export const NODE_BIN = process.execPath;
