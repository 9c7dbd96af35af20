/**
 * Internal route: `POST /internal/v1/keys/{key_id}/invalidate`, called by the DELETE key handler
 * after it has written `revoked_at` and before it answers (docs/dataplane.md "Revocation"). It leaves a
 * tombstone in this agent's `/v2` key cache, so the very next `/v2` request with the key is 401
 * without a DynamoDB read. Idempotent: a repeated DELETE calls it again.
 */
import { internalPaths, ROUTE_PARAMS } from '../../shared/internal-paths.ts';
import { invalidateKeyRequestSchema, keyIdSchema } from '../../shared/schemas/keys.ts';
import { json, pathParam, readJson } from '../../shared/http/body.ts';
import type { InternalRouter } from '../internal-api.ts';

/** Registers the key invalidation route. */
export function register(router: InternalRouter): void {
  router.post(internalPaths.keyInvalidate(ROUTE_PARAMS.keyId), async (request, ctx) => {
    const keyId = pathParam(request.params.key_id, 'key_id', keyIdSchema);
    await readJson(request, invalidateKeyRequestSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    ctx.keyCache.invalidate(keyId);
    // Realtime streams opened with the key end too: revocation leaves nothing authorised by it.
    ctx.realtime.closeKey(keyId);
    return json({ key_id: keyId, invalidated: true });
  });
}
