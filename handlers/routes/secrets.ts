/**
 * Routes: function secrets (contract "PUT /v0/projects/{id}/functions/secrets/{name}"; docs/secrets.md;
 * declared in shared/api/secrets.ts). Owner session only: a project key is 401
 * (requireOwnedProject), another owner's project is 404. Answers carry metadata only; the rules are
 * in handlers/domain/secrets.ts.
 */
import { secrets } from '../../shared/api/index.ts';
import { requireOwnedProject } from '../auth.ts';
import { deleteProjectSecret, listProjectSecrets, projectSecret, putProjectSecret } from '../domain/secrets.ts';
import { json } from '../http.ts';
import { implement } from '../implement.ts';

export const implementations = [
  implement(secrets.put, requireOwnedProject, async ({ caller: { accountId, project }, params, body }, ctx) => {
    const change = { requestId: ctx.requestId, accountId, projectId: project.id, name: params.name };
    const { secret, created } = await putProjectSecret(ctx.deps, { ...change, value: body.value });
    return json(secret, created ? 201 : 200);
  }),

  implement(secrets.list, requireOwnedProject, async ({ caller, query }, ctx) => {
    const page = await listProjectSecrets(ctx.deps, caller.project.id, query);
    return json({ secrets: page.items, next_cursor: page.next_cursor });
  }),

  implement(secrets.read, requireOwnedProject, async ({ caller, params }, ctx) => json(await projectSecret(ctx.deps, caller.project.id, params.name))),

  implement(secrets.remove, requireOwnedProject, async ({ caller: { accountId, project }, params }, ctx) =>
    json(await deleteProjectSecret(ctx.deps, { requestId: ctx.requestId, accountId, projectId: project.id, name: params.name })),
  ),
];
