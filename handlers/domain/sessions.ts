/**
 * Whether a presented session still stands (docs/api.md "Sessions"). A session token proves by its
 * signature whose it is and until when; whether it was signed out, or issued before the account's
 * secret was last rotated, only DynamoDB knows. Every route checks both, with no per-isolate memory
 * that could let an ended session through, and at the cost of one strongly consistent batched read
 * that the route's own first items join (the caller's project, for example), so the check adds no
 * round trip where a route reads anything at all.
 */
import type { SessionClaims } from '../../shared/auth.ts';
import { sessionKeys, sessionStandingIn, type AccountRecord } from '../../shared/db/accounts.ts';
import { batchGetItems, type ItemsRead, type TableKey } from '../../shared/db/client.ts';
import { toRecord, type ProjectRecord } from '../../shared/db/projects.ts';
import { keys } from '../../shared/db/table.ts';
import { errors, type ServiceError } from '../../shared/errors.ts';
import type { Deps } from '../context.ts';

/** A session that stands: what its token carries, its account as just read, and the route's items read with it. */
export interface StandingSession {
  claims: SessionClaims;
  account: AccountRecord;
  items: ItemsRead;
}

/** The 401 of a session that no longer stands. */
export function sessionEndedError(): ServiceError {
  return errors.unauthenticated('the session has ended (signed out, or the account secret was rotated): open a new one');
}

/**
 * Reads the session's standing together with `extra` (the route's first items) in one round trip;
 * 401 when the account is gone, the session was signed out, or the secret was rotated since it was
 * issued. Nothing of `extra` should be used before this answers.
 */
export async function confirmSession(deps: Deps, claims: SessionClaims, extra: readonly TableKey[] = []): Promise<StandingSession> {
  const items = await batchGetItems(deps.db, [...sessionKeys(claims.accountId, claims.sessionId), ...extra]);
  const { account, ended } = sessionStandingIn(items, claims.accountId, claims.sessionId);
  if (!account || ended || account.session_generation !== claims.generation) throw sessionEndedError();
  return { claims, account, items };
}

/**
 * The caller's project, read with the session's standing in one round trip; 401 for a session
 * that has ended, then 404 for a project that is absent or another account's (contract
 * "Authentication" 1: never a hint that it exists).
 */
export async function ownedProjectOf(deps: Deps, claims: SessionClaims, projectId: string): Promise<ProjectRecord> {
  return (await ownedProjectWith(deps, claims, projectId)).project;
}

/**
 * `ownedProjectOf` with `extra` items read in the same round trip (the project's agent record,
 * say), answered only once the session stands and the project is the caller's.
 */
export async function ownedProjectWith(
  deps: Deps,
  claims: SessionClaims,
  projectId: string,
  extra: readonly TableKey[] = [],
): Promise<{ project: ProjectRecord; items: ItemsRead }> {
  const { items } = await confirmSession(deps, claims, [keys.project(projectId), ...extra]);
  const item = items.get(keys.project(projectId));
  if (!item || item.owner !== claims.accountId) throw errors.notFound(`project ${projectId} not found`);
  return { project: toRecord(item), items };
}
