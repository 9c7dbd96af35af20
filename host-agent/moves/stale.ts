/**
 * Copies this agent holds of projects it does not host (docs/durability.md "Relocation", "Agent
 * loss"): what a relocation left when this agent died after its commit, everything a lost agent
 * kept when it comes back, and a copy taken in whose move was never committed. Swept at start,
 * after adoption and before any listener opens, so such a project is never served here again:
 * its engine (if adopted) is stopped, its directories removed, its operations refused.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { batchGetItems, type ItemsRead } from '../../shared/db/client.ts';
import { toRecord, type ProjectRecord } from '../../shared/db/projects.ts';
import { keys } from '../../shared/db/table.ts';
import { errors } from '../../shared/errors.ts';
import { ID_PATTERNS } from '../../shared/ids.ts';
import type { AgentContext } from '../context.ts';
import { bounded } from '../tenants/processes.ts';
import { discardCopy, RECEIVED_MARKER } from './receive.ts';
import { forgetHere } from './relocate.ts';

/** How long a copy taken in may wait for its move's commit before a start removes it. */
export const RECEIVED_GRACE_MS = 10 * 60_000;

/**
 * Removes the copies of projects hosted elsewhere (or never created); answers their ids. An agent
 * declared lost (`lost`) removes every copy it has: those of its projects not yet brought back
 * elsewhere too, which are restored from their off-machine copies (./lost.ts), never served here.
 */
export async function sweepStaleCopies(ctx: AgentContext, lost: boolean): Promise<string[]> {
  const removed: string[] = [];
  const ids = [...projectsOnDisk(ctx.root)];
  // The projects' items 100 to a read: the sweep stands between the agent's start and its listeners.
  for (let i = 0; i < ids.length; i += 100) {
    const chunk = ids.slice(i, i + 100);
    let items: ItemsRead;
    try {
      items = await batchGetItems(ctx.db, chunk.map((id) => keys.project(id)));
    } catch (err) {
      ctx.log(`agent: checking whether ${chunk.length} projects are still hosted here failed: ${(err as Error).message}; checked again at the next start`);
      continue;
    }
    await bounded(chunk, 8, async (projectId) => {
      const item = items.get(keys.project(projectId));
      try {
        if (await sweepOne(ctx, projectId, item ? toRecord(item) : null, lost)) removed.push(projectId);
      } catch (err) {
        ctx.log(`agent: removing the copy of ${projectId}, hosted elsewhere, failed: ${(err as Error).message}; tried again at the next start`);
      }
    });
  }
  if (removed.length > 0) ctx.log(`agent: swept copies of projects hosted elsewhere: ${removed.length} removed: ${removed.join(', ')}`);
  return removed;
}

/** Whether the project's copy here went. */
async function sweepOne(ctx: AgentContext, projectId: string, project: ProjectRecord | null, lost: boolean): Promise<boolean> {
  const marker = join(ctx.tenants.layout.tenantDir(projectId), RECEIVED_MARKER);
  const received = existsSync(marker) ? statSync(marker).mtimeMs : null;
  // A project without its item is a deletion's to finish (docs/lifecycle.md), unless it is a copy taken in that never became one.
  if (!project && received === null) return false;
  if (project?.agent_id === ctx.agentId && !lost) return false;
  if (received !== null && ctx.now() - received < RECEIVED_GRACE_MS) return false;
  await ctx.tenants.exclusive(projectId, async (parts) => {
    const live = parts.engines.get(projectId);
    if (live) await parts.engines.stop(live, 'the project is hosted by another agent');
    parts.queue.retire(projectId, () => errors.orchestrator(`project ${projectId} is hosted by another host agent: retry`));
    forgetHere(ctx, projectId);
    discardCopy(ctx, parts, projectId);
  });
  return true;
}

/** Every project id with a directory under an area of `root` (`tenants/`, `snapshots/`, `blobs/`, …) or a pid record. */
function projectsOnDisk(root: string): Set<string> {
  const ids = new Set<string>();
  for (const area of safeList(root)) {
    for (const name of safeList(join(root, area))) {
      const id = name.endsWith('.json') ? name.slice(0, -'.json'.length) : name;
      if (ID_PATTERNS.prj.test(id)) ids.add(id);
    }
  }
  return ids;
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
