/** Receipts: the owner's record of object and secret changes, newest first (docs/storage.md). */
import { listReceipts, type Receipt } from '../../shared/db/receipts.ts';
import type { Deps } from '../context.ts';
import { pageOf, type AnsweredPage, type PageQuery } from './pages.ts';

/** One page of the project's receipts, newest first. */
export function listProjectReceipts(deps: Deps, projectId: string, query: PageQuery): Promise<AnsweredPage<Receipt>> {
  return pageOf(deps, ['receipts', projectId], query, (limit, after) => listReceipts(deps.db, projectId, limit, after));
}
