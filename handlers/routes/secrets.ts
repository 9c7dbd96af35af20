/**
 * Routes: function secrets (contract "PUT /v0/projects/{id}/functions/secrets/{name}"; docs/secrets.md).
 * Owner session only: a project key is 401 (requireOwnedProject), another owner's project is 404.
 * Answers carry metadata only; the rules are in handlers/domain/secrets.ts.
 *
 * Beyond the contract, as users expect: list (`GET …/functions/secrets`), read one secret's metadata,
 * and delete (receipted `secret.delete`).
 */
import { z } from 'zod';
import { RESERVED_ENV_NAMES, SECRET_NAME_PATTERN } from '../../shared/db/secrets.ts';
import { pageQuerySchema } from '../../shared/schemas.ts';
import { requireOwnedProject } from '../auth.ts';
import type { Routes } from '../context.ts';
import { deleteProjectSecret, listProjectSecrets, projectSecret, putProjectSecret } from '../domain/secrets.ts';
import { json, noBody, noInput, pathParam, queryOf, readJson } from '../http.ts';

/** Longest value, in characters (Unicode code points), per the contract's "Limits". */
export const SECRET_VALUE_MAX_CHARS = 4096;

const reserved: readonly string[] = RESERVED_ENV_NAMES;

/** `{name}`: the contract's pattern, and not one of the names the service sets itself. */
export const secretNameSchema = z
  .string()
  .regex(SECRET_NAME_PATTERN, 'must match ^[A-Z][A-Z0-9_]{0,63}$')
  .refine((n) => !reserved.includes(n), { message: `is reserved: ${RESERVED_ENV_NAMES.join(', ')} are set by the service` });

// A lone surrogate (reachable through a JSON "\ud800" escape) has no UTF-8 encoding.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * `value`: UTF-8, no NUL, at most 4096 characters. Every message here is fixed text: none quotes the
 * value, not even in part.
 */
export const secretValueSchema = z
  .string()
  .refine((v) => v.length <= SECRET_VALUE_MAX_CHARS * 2 && [...v].length <= SECRET_VALUE_MAX_CHARS, {
    message: `must be at most ${SECRET_VALUE_MAX_CHARS} characters`,
    abort: true,
  })
  .refine((v) => !v.includes('\0'), { message: 'must not contain NUL', abort: true })
  .refine((v) => !LONE_SURROGATE.test(v), { message: 'must be valid UTF-8 (no lone surrogates)' });

/** Body of PUT functions/secrets/{name}. */
export const putSecretRequestSchema = z.strictObject({ value: secretValueSchema });

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
