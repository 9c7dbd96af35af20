/**
 * Routes: receipts, newest first (docs/storage.md): `GET /v0/projects/{id}/receipts` for a project the
 * caller owns, and `GET /v0/receipts?project=…`, which also serves a project the caller deleted, for
 * the retention of docs/lifecycle.md "Deleting a project".
 */
import { pageQuerySchema } from '../../shared/schemas/pagination.ts';
import { accountReceiptsQuerySchema } from '../../shared/schemas/project-delete.ts';
import { requireOwnedProject, requireSession } from '../auth.ts';
import type { Routes } from '../context.ts';
import { listAccountReceipts, listProjectReceipts } from '../domain/receipts.ts';
import { json, noBody, queryOf } from '../http.ts';

/** Registers the receipts routes. */
export function register(router: Routes): void {
  router.get('/v0/projects/:id/receipts', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await listProjectReceipts(ctx.deps, project.id, query);
    return json({ receipts: page.items, next_cursor: page.next_cursor });
  });

  router.get('/v0/receipts', async (request, ctx) => {
    const accountId = await requireSession(request, ctx);
    const { project, ...page } = queryOf(new URL(request.url), accountReceiptsQuerySchema);
    await noBody(request);
    const answered = await listAccountReceipts(ctx.deps, accountId, project, page);
    return json({ receipts: answered.items, next_cursor: answered.next_cursor });
  });
}
