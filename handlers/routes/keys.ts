/**
 * Routes: project keys (contract "POST/GET/DELETE /v0/projects/{id}/keys"). The rules, including
 * telling the agent of a revocation before answering, are in handlers/domain/keys.ts.
 */
import { createKeyRequestSchema, keyIdSchema } from '../../shared/schemas/keys.ts';
import { pageQuerySchema } from '../../shared/schemas/pagination.ts';
import { requireOwnedProject } from '../auth.ts';
import type { Routes } from '../context.ts';
import { issueKey, listProjectKeys, revokeProjectKey } from '../domain/keys.ts';
import { json, noBody, noInput, pathParam, queryOf, readJson } from '../http.ts';

/** Registers the key routes. */
export function register(router: Routes): void {
  router.post('/v0/projects/:id/keys', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const body = await readJson(request, createKeyRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    const issued = await issueKey(ctx.deps, { projectId: project.id, label: body.label ?? null });
    // The one response that ever carries the secret (contract "Key states").
    return json(issued, 201, { 'cache-control': 'no-store' });
  });

  router.get('/v0/projects/:id/keys', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await listProjectKeys(ctx.deps, project.id, query);
    return json({ keys: page.items, next_cursor: page.next_cursor });
  });

  router.delete('/v0/projects/:id/keys/:key_id', async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const keyId = pathParam(request.params.key_id, 'key_id', keyIdSchema);
    await noInput(request);
    return json(await revokeProjectKey(ctx.deps, { requestId: ctx.requestId, project, keyId }));
  });
}
