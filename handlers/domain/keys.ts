/**
 * Project keys (contract "Project key", "Key states"; docs/dataplane.md). The secret is answered
 * once, at issue; only its verifier is stored. A revocation is written to DynamoDB first and then
 * told to the host agent serving the project's `/v2` traffic, before answering, so the very next
 * `/v2` request with the key is 401.
 */
import { newProjectKey, verifierOf } from '../../shared/auth.ts';
import { createKey, listKeys, revokeKey, type KeyView } from '../../shared/db/keys.ts';
import type { ProjectRecord } from '../../shared/db/projects.ts';
import { internalPaths } from '../../shared/internal-paths.ts';
import { nowIso } from '../../shared/time.ts';
import type { Deps } from '../context.ts';
import { pageOf, type AnsweredPage, type PageQuery } from './pages.ts';
import { agentFor } from './placement.ts';

/** A key as issued: the one answer that ever carries its secret (`key`). */
export interface IssuedKey {
  key_id: string;
  key: string;
  label: string | null;
  created_at: string;
}

/** Answer of the internal route that drops a revoked key from an agent's cache (host-agent/routes/keys.ts). */
export interface KeyInvalidated {
  key_id: string;
  invalidated: true;
}

/** Issues a key of `projectId`, storing only its verifier. */
export async function issueKey(deps: Deps, input: { projectId: string; label: string | null }): Promise<IssuedKey> {
  const issued = newProjectKey();
  const created_at = nowIso(deps.now());
  await createKey(deps.db, {
    key_id: issued.keyId,
    project: input.projectId,
    label: input.label,
    created_at,
    verifier: await verifierOf(deps.settings.SVCD_KEY_PEPPER, issued.secret),
  });
  return { key_id: issued.keyId, key: issued.key, label: input.label, created_at };
}

/** One page of the project's keys (never their secrets). */
export function listProjectKeys(deps: Deps, projectId: string, query: PageQuery): Promise<AnsweredPage<KeyView>> {
  return pageOf(deps, ['keys', projectId], query, (limit, after) => listKeys(deps.db, projectId, limit, after));
}

/**
 * Revokes a key and has the project's agent drop it from its cache; idempotent, and a repeat also
 * tells the agent again, so a retry after a failed invalidation (503) completes it.
 */
export async function revokeProjectKey(
  deps: Deps,
  input: { requestId: string; project: Pick<ProjectRecord, 'id' | 'agent_id'>; keyId: string },
): Promise<KeyView> {
  const { project, keyId } = input;
  // Revoke first: whatever happens next, DynamoDB says revoked, so a cold cache refuses the key.
  const key = await revokeKey(deps.db, project.id, keyId, nowIso(deps.now()));
  // Only the owning agent judges revocation: other agents forward the key to it (docs/dataplane.md
  // "Several agents"), so telling it is enough.
  const agent = await agentFor(deps, project);
  await deps.agents.json<KeyInvalidated>(agent, 'POST', internalPaths.keyInvalidate(keyId), {
    body: { project_id: project.id },
    requestId: input.requestId,
  });
  return key;
}
