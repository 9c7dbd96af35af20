/** Route: `GET /v0/projects/{id}/receipts`, the owner's receipts, newest first (docs/storage.md). */
import { pageQuerySchema } from '../../shared/schemas/pagination.ts';
import { requireOwnedProject } from '../auth.ts';
import type { Routes } from '../context.ts';
import { listProjectReceipts } from '../domain/receipts.ts';
import { json, noBody, queryOf } from '../http.ts';

/** Registers the receipts route. */
export function register(router: Routes): void {
  router.get('/v0/projects/:id/receipts', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await listProjectReceipts(ctx.deps, project.id, query);
    return json({ receipts: page.items, next_cursor: page.next_cursor });
  });
}
