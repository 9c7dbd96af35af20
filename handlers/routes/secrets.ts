/**
 * Routes: function secrets (contract "PUT /v0/projects/{id}/functions/secrets/{name}"; docs/secrets.md).
 * Owner session only: a project key is 401 (requireOwnedProject), another owner's project is 404.
 * Answers carry metadata only; the rules are in handlers/domain/secrets.ts.
 *
 * Beyond the contract, as users expect: list (`GET …/functions/secrets`), read one secret's metadata,
 * and delete (receipted `secret.delete`).
 */
import { pageQuerySchema } from '../../shared/schemas/pagination.ts';
import { putSecretRequestSchema, secretNameSchema } from '../../shared/schemas/secrets.ts';
import { requireOwnedProject } from '../auth.ts';
import type { Routes } from '../context.ts';
import { deleteProjectSecret, listProjectSecrets, projectSecret, putProjectSecret } from '../domain/secrets.ts';
import { json, noBody, noInput, pathParam, queryOf, readJson } from '../http.ts';

const SECRETS_PATH = '/v0/projects/:id/functions/secrets';

/** Registers the function-secret routes. */
export function register(router: Routes): void {
  router.put(`${SECRETS_PATH}/:name`, async (request, ctx) => {
    const { accountId, project } = await requireOwnedProject(request, ctx);
    const name = pathParam(request.params.name, 'name', secretNameSchema);
    const body = await readJson(request, putSecretRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    const change = { requestId: ctx.requestId, accountId, projectId: project.id, name };
    const { secret, created } = await putProjectSecret(ctx.deps, { ...change, value: body.value });
    return json(secret, created ? 201 : 200);
  });

  router.get(SECRETS_PATH, async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await listProjectSecrets(ctx.deps, project.id, query);
    return json({ secrets: page.items, next_cursor: page.next_cursor });
  });

  router.get(`${SECRETS_PATH}/:name`, async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const name = pathParam(request.params.name, 'name', secretNameSchema);
    await noInput(request);
    return json(await projectSecret(ctx.deps, project.id, name));
  });

  router.delete(`${SECRETS_PATH}/:name`, async (request, ctx) => {
    const { accountId, project } = await requireOwnedProject(request, ctx);
    const name = pathParam(request.params.name, 'name', secretNameSchema);
    await noInput(request);
    return json(await deleteProjectSecret(ctx.deps, { requestId: ctx.requestId, accountId, projectId: project.id, name }));
  });
}
