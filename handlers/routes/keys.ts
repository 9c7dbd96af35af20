/**
 * Routes: project keys (contract "POST/GET/DELETE /v0/projects/{id}/keys"; declared in
 * shared/api/keys.ts). The rules, including telling the agent of a revocation before answering,
 * are in handlers/domain/keys.ts.
 */
import { keys } from '../../shared/api/index.ts';
import { requireOwnedProject } from '../auth.ts';
import { issueKey, listProjectKeys, revokeProjectKey } from '../domain/keys.ts';
import { json } from '../http.ts';
import { implement } from '../implement.ts';

export const implementations = [
  implement(keys.issue, requireOwnedProject, async ({ caller, body }, ctx) => {
    const issued = await issueKey(ctx.deps, { projectId: caller.project.id, label: body.label ?? null });
    // The one response that ever carries the secret (contract "Key states").
    return json(issued, 201, { 'cache-control': 'no-store' });
  }),

  implement(keys.list, requireOwnedProject, async ({ caller, query }, ctx) => {
    const page = await listProjectKeys(ctx.deps, caller.project.id, query);
    return json({ keys: page.items, next_cursor: page.next_cursor });
  }),

  implement(keys.revoke, requireOwnedProject, async ({ caller, params }, ctx) =>
    json(await revokeProjectKey(ctx.deps, { requestId: ctx.requestId, project: caller.project, keyId: params.key_id })),
  ),
];
