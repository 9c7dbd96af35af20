/** Route: `GET /v0/projects/{id}/receipts`, the owner's receipts, newest first (DESIGN §3 Receipts). */
import type { RouterType } from 'itty-router';
import { listReceipts } from '../shared/db/receipts.ts';
import { pageQuerySchema } from '../shared/schemas.ts';
import { requireOwnedProject } from './auth.ts';
import type { Ctx } from './context.ts';
import { json, queryOf } from './http.ts';

/** Registers the receipts route. */
export function register(router: RouterType<Request, [Ctx]>): void {
  router.get('/v0/projects/:id/receipts', async (request, ctx) => {
    const { project } = await requireOwnedProject(request as never, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    const page = await listReceipts(ctx.deps.db, project.id, query.limit ?? ctx.deps.settings.SVCD_LIST_LIMIT_DEFAULT, query.cursor);
    return json({ receipts: page.items, next_cursor: page.nextCursor });
  });
}
