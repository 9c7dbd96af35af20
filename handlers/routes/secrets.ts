/**
 * Routes: function secrets (contract "PUT /v0/projects/{id}/functions/secrets/{name}"; DESIGN §3
 * Function secrets; issue #8). Owner session only: a project key is 401 (requireOwnedProject), another
 * owner's project is 404. Answers carry metadata only; the value is sealed here, before anything is
 * stored, and never appears in an answer, an error message, a receipt or a log line.
 *
 * Beyond the contract, as users expect: list (`GET …/functions/secrets`), read one secret's metadata,
 * and delete (receipted `secret.delete`).
 */
import { z } from 'zod';
import { deleteSecret, getSecret, listSecrets, putSecret, RESERVED_ENV_NAMES, SECRET_NAME_PATTERN } from '../shared/db/secrets.ts';
import { ServiceError, errors } from '../shared/errors.ts';
import { pageQuerySchema } from '../shared/schemas.ts';
import { sealSecret } from '../shared/secrets-crypto.ts';
import { nowIso } from '../shared/time.ts';
import { requireOwnedProject } from './auth.ts';
import type { Routes } from './context.ts';
import { json, listPage, noBody, noInput, pathParam, queryOf, readJson } from './http.ts';

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
    const { settings, db, now } = ctx.deps;
    const { accountId, project } = await requireOwnedProject(request, ctx);
    const name = pathParam(request.params.name, 'name', secretNameSchema);
    const body = await readJson(request, putSecretRequestSchema, settings.SVCD_JSON_MAX_BYTES);
    const ring = ctx.deps.secrets;
    if (!ring) throw new ServiceError('not_implemented', 'function secrets are not configured on this deployment (SVCD_SECRETS_KEYS)');
    const sealed = await sealSecret(ring, project.id, name, body.value);
    const change = { project: project.id, name, actor: accountId, requestId: ctx.requestId, at: nowIso(now()) };
    const { secret, created } = await putSecret(db, change, sealed);
    return json(secret, created ? 201 : 200);
  });

  router.get(SECRETS_PATH, async (request, ctx) => {
    const { db } = ctx.deps;
    const { project } = await requireOwnedProject(request, ctx);
    const query = queryOf(new URL(request.url), pageQuerySchema);
    await noBody(request);
    const page = await listPage(ctx, ['secrets', project.id], query, (limit, after) => listSecrets(db, project.id, limit, after));
    return json({ secrets: page.items, next_cursor: page.next_cursor });
  });

  router.get(`${SECRETS_PATH}/:name`, async (request, ctx) => {
    const { project } = await requireOwnedProject(request, ctx);
    const name = pathParam(request.params.name, 'name', secretNameSchema);
    await noInput(request);
    const secret = await getSecret(ctx.deps.db, project.id, name);
    if (!secret) throw errors.notFound(`secret ${name} not found`);
    return json(secret);
  });

  router.delete(`${SECRETS_PATH}/:name`, async (request, ctx) => {
    const { accountId, project } = await requireOwnedProject(request, ctx);
    const name = pathParam(request.params.name, 'name', secretNameSchema);
    await noInput(request);
    const change = { project: project.id, name, actor: accountId, requestId: ctx.requestId, at: nowIso(ctx.deps.now()) };
    return json(await deleteSecret(ctx.deps.db, change));
  });
}
