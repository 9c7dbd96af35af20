/**
 * Routes: receipts, newest first (docs/storage.md; declared in shared/api/receipts.ts):
 * `GET /v0/projects/{id}/receipts` for a project the caller owns, and `GET /v0/receipts?project=…`,
 * which also serves a project the caller deleted, for the retention of docs/lifecycle.md "Deleting
 * a project".
 */
import { receipts } from '../../shared/api/index.ts';
import { requireOwnedProject, requireSession } from '../auth.ts';
import { listAccountReceipts, listProjectReceipts } from '../domain/receipts.ts';
import { json } from '../http.ts';
import { implement } from '../implement.ts';

export const implementations = [
  implement(receipts.ofProject, requireOwnedProject, async ({ caller, query }, ctx) => {
    const page = await listProjectReceipts(ctx.deps, caller.project.id, query);
    return json({ receipts: page.items, next_cursor: page.next_cursor });
  }),

  implement(receipts.ofAccount, requireSession, async ({ caller: accountId, query: { project, ...page } }, ctx) => {
    const answered = await listAccountReceipts(ctx.deps, accountId, project, page);
    return json({ receipts: answered.items, next_cursor: answered.next_cursor });
  }),
];
