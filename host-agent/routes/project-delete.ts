/**
 * Internal route: `POST /internal/v1/projects/{id}/delete` `{recorded, actor, request_id}` →
 * `{state, deleted_at}`, called by the public `DELETE /v0/projects/{id}` once it has checked
 * ownership (docs/lifecycle.md "Deleting a project"). The supervisor does the deletion; this route
 * hands it what must forget the project's keys on this agent — the revocation path of
 * host-agent/routes/keys.ts for each of them: a tombstone in the `/v2` key cache, so the very next
 * `/v2` request with one is 401, and the end of realtime streams they opened — and ends the
 * project's other realtime streams.
 */
import { internalPaths, ROUTE_PARAMS } from '../../shared/internal-paths.ts';
import { json, pathParam, readJson } from '../../shared/http/body.ts';
import { internalProjectDeleteSchema } from '../../shared/schemas/project-delete.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import type { AgentContext } from '../context.ts';
import type { InternalRouter } from '../internal-api.ts';

/** Registers the project deletion route. */
export function register(router: InternalRouter): void {
  router.post(internalPaths.lifecycle(ROUTE_PARAMS.id, 'delete'), async (request, ctx) => {
    const projectId = pathParam((request as Request & { params: Record<string, string> }).params.id, 'id', projectIdSchema);
    const body = await readJson(request, internalProjectDeleteSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    const answer = await ctx.tenants.deleteProject(projectId, { actor: body.actor, requestId: body.request_id, signal: request.signal }, (keyIds) =>
      forgetProject(ctx, projectId, keyIds),
    );
    return json(answer);
  });
}

/** Drops what this agent holds for a deleted project's keys and streams. */
function forgetProject(ctx: AgentContext, projectId: string, keyIds: string[]): void {
  for (const keyId of keyIds) {
    ctx.keyCache.invalidate(keyId);
    ctx.realtime.closeKey(keyId);
  }
  ctx.realtime.closeProject(projectId);
  // Its function workers end and none of its functions is served again (docs/functions.md).
  ctx.functions.forgetProject(projectId);
}
