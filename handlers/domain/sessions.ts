/**
 * Whether a presented session still stands (docs/api.md "Sessions"): the handlers' side of the one
 * check of shared/sessions.ts, on `deps`.
 */
import type { SessionClaims } from '../../shared/auth.ts';
import type { ItemsRead, TableKey } from '../../shared/db/client.ts';
import type { ProjectRecord } from '../../shared/db/projects.ts';
import * as sessions from '../../shared/sessions.ts';
import type { Deps } from '../context.ts';

export { sessionEndedError, type StandingSession } from '../../shared/sessions.ts';

/** shared/sessions.ts `confirmSession` on the handlers' table. */
export function confirmSession(deps: Deps, claims: SessionClaims, extra: readonly TableKey[] = []): Promise<sessions.StandingSession> {
  return sessions.confirmSession(deps.db, claims, extra);
}

/** The caller's project, read with the session's standing in one round trip (401, then 404). */
export async function ownedProjectOf(deps: Deps, claims: SessionClaims, projectId: string): Promise<ProjectRecord> {
  return (await sessions.ownedProjectWith(deps.db, claims, projectId)).project;
}

/** `ownedProjectOf` with `extra` items read in the same round trip (the project's agent record, say). */
export function ownedProjectWith(deps: Deps, claims: SessionClaims, projectId: string, extra: readonly TableKey[] = []): Promise<{ project: ProjectRecord; items: ItemsRead }> {
  return sessions.ownedProjectWith(deps.db, claims, projectId, extra);
}
