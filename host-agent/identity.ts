/** The agent's identity: `SVCD_AGENT_ID`, or an id generated once and kept under `SVCD_ROOT`. */
import { mkdirSync, readFileSync, writeFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { ID_PATTERNS, newId } from '../shared/ids.ts';

/** Answers the agent id, creating and persisting one on first start. */
export function agentIdentity(root: string, configured: string | undefined): string {
  if (configured) return configured;
  const file = join(root, 'agent-id');
  try {
    const id = readFileSync(file, 'utf8').trim();
    if (ID_PATTERNS.agt.test(id)) return id;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  mkdirSync(root, { recursive: true });
  const id = newId('agt');
  writeFileSync(`${file}.tmp`, `${id}\n`);
  renameSync(`${file}.tmp`, file);
  return id;
}
