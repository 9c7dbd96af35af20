/**
 * Receipts: the owner's record of object and secret changes, newest first (docs/storage.md), and of a
 * project's deletion; a deleted project's receipts stay readable to its owner for the retention
 * `SVCD_DELETED_RECEIPTS_RETENTION_DAYS` gave at its deletion (docs/lifecycle.md "Deleting a project").
 */
import { getProjectDeletion } from '../../shared/db/project-delete.ts';
import { getProject } from '../../shared/db/projects.ts';
import { listReceipts, type Receipt } from '../../shared/db/receipts.ts';
import { errors } from '../../shared/errors.ts';
import type { Deps } from '../context.ts';
import { pageOf, type AnsweredPage, type PageQuery } from './pages.ts';

/** One page of the project's receipts, newest first. */
export function listProjectReceipts(deps: Deps, projectId: string, query: PageQuery): Promise<AnsweredPage<Receipt>> {
  return pageOf(deps, ['receipts', projectId], query, (limit, after) => listReceipts(deps.db, projectId, limit, after));
}

/**
 * One page of the receipts of a project of `accountId`: one it owns, or one it owned that was
 * deleted less than the retention ago. Anything else is 404, as for a project that never existed.
 */
export async function listAccountReceipts(deps: Deps, accountId: string, projectId: string, query: PageQuery): Promise<AnsweredPage<Receipt>> {
  const [project, deletion] = await Promise.all([getProject(deps.db, projectId), getProjectDeletion(deps.db, projectId)]);
  const owned = project?.owner === accountId;
  const retained = deletion !== null && deletion.owner === accountId && Date.parse(deletion.expires_at) > deps.now();
  if (!owned && !retained) throw errors.notFound(`project ${projectId} not found`);
  return listProjectReceipts(deps, projectId, query);
}
