/**
 * What every move does, in one place (docs/durability.md): the receiving agent takes the project's
 * copy in, then one transaction commits the move (shared/db/moves.ts); a commit that fails drops
 * the copy again. And the loop of a drain or a recovery: each project moved in turn (two at once),
 * each outcome reported as a progress line.
 */
import type { AgentRecord } from '../../shared/db/agents.ts';
import { moveProject, type Move } from '../../shared/db/moves.ts';
import { newReceipt, type ReceiptOp } from '../../shared/db/receipts.ts';
import { internalPaths } from '../../shared/internal-paths.ts';
import type { ReceiveOrder } from '../../shared/schemas/moves.ts';
import type { AgentContext } from '../context.ts';
import { bounded } from '../tenants/processes.ts';
import { agentCalls } from './calls.ts';

/** One hand-over: the copy the target takes in, and the move committed once it has. */
export interface HandOver extends Omit<Move, 'to' | 'receipt'> {
  to: AgentRecord;
  receive: ReceiveOrder;
  op: Extract<ReceiptOp, 'project.relocate' | 'project.recover'>;
  actor: string;
  requestId: string;
}

/** Has `to` take the copy in, then commits the move; a refused commit drops the copy (best effort) and is rethrown. */
export async function handOver(ctx: AgentContext, h: HandOver): Promise<void> {
  const calls = agentCalls(ctx);
  await calls.json(h.to, 'POST', internalPaths.receive(h.projectId), { body: h.receive, requestId: h.requestId });
  const { to, receive: _receive, op, actor, requestId, ...move } = h;
  try {
    await moveProject(ctx.db, {
      ...move,
      to: to.agent_id,
      receipt: newReceipt({ project: h.projectId, op, target: to.agent_id, actor, request_id: requestId, at: h.at }),
    });
  } catch (err) {
    await calls.json(to, 'DELETE', internalPaths.receive(h.projectId)).catch(() => {});
    throw err;
  }
}

/** One line of a drain's or a recovery's progress (the NDJSON the operator command prints). */
export type Progress =
  | { event: 'start'; projects: number }
  | { event: 'moved'; project: string; to: string; state: string; snapshot_id: string | null }
  | { event: 'failed'; project: string; error: string }
  | { event: 'done'; moved: number; failed: number };

/** Moves each project with `move`, two at once, reporting each outcome; answers the last line. */
export async function moveEach<P extends { id: string }>(
  projects: P[],
  move: (project: P) => Promise<{ to: string; state: string; snapshot_id: string | null }>,
  report: (line: Progress) => void,
): Promise<Extract<Progress, { event: 'done' }>> {
  report({ event: 'start', projects: projects.length });
  let moved = 0;
  let failed = 0;
  await bounded(projects, 2, async (project) => {
    try {
      const done = await move(project);
      moved++;
      report({ event: 'moved', project: project.id, to: done.to, state: done.state, snapshot_id: done.snapshot_id });
    } catch (err) {
      failed++;
      report({ event: 'failed', project: project.id, error: (err as Error).message });
    }
  });
  const last = { event: 'done' as const, moved, failed };
  report(last);
  return last;
}
