/**
 * Internal route: `POST /internal/v1/keys/{key_id}/invalidate`, called by the DELETE key handler
 * after it has written `revoked_at` and before it answers (DESIGN §3 Project keys). It leaves a
 * tombstone in this agent's `/v2` key cache, so the very next `/v2` request with the key is 401
 * without a DynamoDB read. Idempotent: a repeated DELETE calls it again.
 */
import { z } from 'zod';
import { projectIdSchema } from '../../shared/schemas.ts';
import { json, pathParam, readJson } from '../../shared/http/body.ts';
import type { InternalRouter } from '../internal-api.ts';

const keyIdSchema = z.string().regex(/^[0-9a-f]{32}$/, 'must match ^[0-9a-f]{32}$');
const invalidateRequestSchema = z.strictObject({ project_id: projectIdSchema });

/** Registers the key invalidation route. */
export function register(router: InternalRouter): void {
  router.post('/internal/v1/keys/:key_id/invalidate', async (request, ctx) => {
    const keyId = pathParam(request.params.key_id, 'key_id', keyIdSchema);
    await readJson(request, invalidateRequestSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    ctx.keyCache.invalidate(keyId);
    // Realtime streams opened with the key end too: revocation leaves nothing authorised by it.
    ctx.realtime.closeKey(keyId);
    return json({ key_id: keyId, invalidated: true });
  });
}
