/**
 * Routes: project keys (contract "POST/GET/DELETE /v0/projects/{id}/keys"; DESIGN §3 Project keys).
 * The secret is answered once, by POST; only its verifier is stored. DELETE revokes in DynamoDB and
 * then tells the host agent serving the project's `/v2` traffic to drop the key from its cache
 * before answering, so the very next `/v2` request with the key is 401 (docs/dataplane.md).
 */
import { z } from 'zod';
import { newProjectKey, verifierOf } from '../shared/auth.ts';
import { createKey, listKeys, revokeKey, type KeyView } from '../shared/db/keys.ts';
import { labelSchema, pageQuerySchema } from '../shared/schemas.ts';
import { nowIso } from '../shared/time.ts';
import { requireOwnedProject } from './auth.ts';
import type { Routes } from './context.ts';
import { json, listPage, noBody, noInput, pathParam, queryOf, readJson } from './http.ts';
import { agentFor } from './domain/placement.ts';

/** A key id: 32 lowercase hex (contract "Project key"). */
export const keyIdSchema = z.string().regex(/^[0-9a-f]{32}$/, 'must match ^[0-9a-f]{32}$');

/** `POST keys` body: an optional label, string or null, at most 64 characters. */
export const createKeyRequestSchema = z.strictObject({ label: labelSchema.optional() });

/** Answer of the internal route that drops a revoked key from an agent's cache (host-agent/routes/keys.ts). */
export interface KeyInvalidated {
  key_id: string;
  invalidated: true;
}

/** Registers the key routes. */
export function register(router: Routes): void {
  router.post('/v0/projects/:id/keys', async (request, ctx) => {
    const { settings, db } = ctx.deps;
    const { project } = await requireOwnedProject(request, ctx);
    const body = await readJson(request, createKeyRequestSchema, settings.SVCD_JSON_MAX_BYTES);
    const issued = newProjectKey();
    const created_at = nowIso(ctx.deps.now());
    const label = body.label ?? null;
    await createKey(db, {
      key_id: issued.keyId,
      project: project.id,
      label,
      created_at,
      verifier: await verifierOf(settings.SVCD_KEY_PEPPER, issued.secret),
    });
    // The one response that ever carries the secret (contract "Key states").
    return json({ key_id: issued.keyId, key: issued.key, label, created_at }, 201, { 'cache-control': 'no-store' });
  });

  router.get('/v0/projects/:id/keys', async (request, ctx) => {
    const { db } = ctx.deps;
    const { project } = await requireOwnedProject(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await listPage(ctx, ['keys', project.id], query, (limit, after) => listKeys(db, project.id, limit, after));
    return json({ keys: page.items, next_cursor: page.next_cursor });
  });

  router.delete('/v0/projects/:id/keys/:key_id', async (request, ctx) => {
    const { db } = ctx.deps;
    const { project } = await requireOwnedProject(request, ctx);
    const keyId = pathParam(request.params.key_id, 'key_id', keyIdSchema);
    await noInput(request);
    // Revoke first: whatever happens next, DynamoDB says revoked, so a cold cache refuses the key.
    const key: KeyView = await revokeKey(db, project.id, keyId, nowIso(ctx.deps.now()));
    // Then the agent's warm cache, before answering; also on a repeated DELETE, so a retry after a
    // failed invalidation (503 below) completes it. Only the owning agent judges revocation: other
    // agents forward the key to it (docs/dataplane.md "Several agents"), so telling it is enough.
    const agent = await agentFor(ctx.deps, project);
    await ctx.deps.agents.json<KeyInvalidated>(agent, 'POST', `/internal/v1/keys/${keyId}/invalidate`, {
      body: { project_id: project.id },
      requestId: ctx.requestId,
    });
    return json(key);
  });
}
