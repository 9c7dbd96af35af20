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
import { loadSealedSecrets, RESERVED_ENV_NAMES } from '../../shared/db/secrets.ts';
import { projectIdSchema } from '../../shared/schemas/projects.ts';
import { functionEnvRequestSchema } from '../../shared/schemas/secrets.ts';
import { openSecret } from '../../shared/secrets-crypto.ts';
import type { AgentContext } from '../context.ts';
import { pathParam, readJson } from '../../shared/http/body.ts';
import type { InternalRouter } from '../internal-api.ts';

/** What an invocation is for. */
export interface InvocationTarget {
  projectId: string;
  functionName: string;
  cloudOrigin: string;
}

/**
 * The environment of one invocation of `target`: decrypted secrets in name order, then the three
 * variables the service owns. Throws when a secret cannot be decrypted (its key id left the ring, or
 * the ciphertext was altered): an invocation never runs with a secret silently missing.
 */
export async function functionEnvironment(ctx: AgentContext, target: InvocationTarget): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  const secrets = await loadSealedSecrets(ctx.db, target.projectId);
  if (secrets.length > 0 && !ctx.secrets) {
    throw new Error(`host agent ${ctx.agentId} has no SVCD_SECRETS_KEYS: cannot decrypt the secrets of project ${target.projectId}`);
  }
  for (const s of secrets) env[s.name] = await openSecret(ctx.secrets!, target.projectId, s.name, s.sealed);
  // Set last, after removing any same-named entry, so they are both authoritative and last in order.
  const fixed: Record<(typeof RESERVED_ENV_NAMES)[number], string> = {
    PROJECT_ID: target.projectId,
    FUNCTION_NAME: target.functionName,
    CLOUD_ORIGIN: target.cloudOrigin,
  };
  for (const name of RESERVED_ENV_NAMES) {
    delete env[name];
    env[name] = fixed[name];
  }
  return env;
}

/** Registers the function-env route. */
export function register(router: InternalRouter): void {
  router.post('/internal/v1/projects/:id/function-env', async (request, ctx) => {
    const projectId = pathParam((request as Request & { params: Record<string, string> }).params.id, 'id', projectIdSchema);
    const body = await readJson(request, functionEnvRequestSchema, ctx.settings.SVCD_JSON_MAX_BYTES);
    const env = await functionEnvironment(ctx, { projectId, functionName: body.function_name, cloudOrigin: body.cloud_origin });
    return new Response(JSON.stringify({ env }), {
      status: 200,
      headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
    });
  });
}
