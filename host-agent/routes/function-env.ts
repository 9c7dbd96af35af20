/**
 * The environment of a function invocation (the interface contract "PUT functions/secrets";
 * docs/secrets.md). Internal route of the host agent:
 * `POST /internal/v1/projects/{id}/function-env` `{function_name, cloud_origin}` → `{env}`.
 *
 * Order of `env` (docs/secrets.md): the project's secrets decrypted, by name, then `PROJECT_ID`,
 * `FUNCTION_NAME`, `CLOUD_ORIGIN`, set last so no secret can ever shadow them. Secrets are read
 * strongly consistently at each call, so the next invocation after a put or delete sees the new set.
 *
 * The answer holds secret values: it is never logged, and any failure names the secret and key id only.
 */
import { internalPaths, ROUTE_PARAMS } from '../../shared/internal-paths.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import { functionEnvRequestSchema } from '../../shared/schemas/secrets.ts';
import type { AgentContext } from '../context.ts';
import { invocationEnv, readSecretSet, type InvocationTarget } from '../functions/env.ts';
import { pathParam, readJson } from '../../shared/http/body.ts';
import type { InternalRouter } from '../internal-api.ts';

export type { InvocationTarget } from '../functions/env.ts';

/**
 * The environment of one invocation of `target`: decrypted secrets in name order, then the three
 * variables the service owns (host-agent/functions/env.ts, which invocations use). Throws when a
 * secret cannot be decrypted (its key id left the ring, or the ciphertext was altered): an invocation
 * never runs with a secret silently missing.
 */
export async function functionEnvironment(ctx: Pick<AgentContext, 'db' | 'secrets' | 'agentId'>, target: InvocationTarget): Promise<Record<string, string>> {
  return invocationEnv(await readSecretSet(ctx, target.projectId), target);
}

/** Registers the function-env route. */
export function register(router: InternalRouter): void {
  router.post(internalPaths.functionEnv(ROUTE_PARAMS.id), async (request, ctx) => {
    const projectId = pathParam((request as Request & { params: Record<string, string> }).params.id, 'id', projectIdSchema);
    const body = await readJson(request, functionEnvRequestSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    const env = await functionEnvironment(ctx, { projectId, functionName: body.function_name, cloudOrigin: body.cloud_origin });
    return new Response(JSON.stringify({ env }), {
      status: 200,
      headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
    });
  });
}
