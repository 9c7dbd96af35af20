/**
 * Whether a presented session still stands (docs/api.md "Sessions"), judged once for every side:
 * the handlers' guards (handlers/domain/sessions.ts) and the agent's public realtime routes. A
 * session token proves by its signature whose it is and until when; whether it was signed out, or
 * issued before the account's secret was last rotated, only DynamoDB knows. Both are checked with
 * no per-isolate memory that could let an ended session through, at the cost of one strongly
 * consistent batched read that the route's own first items join (the caller's project, for
 * example), so the check adds no round trip where a route reads anything at all. Web-standard only.
 */
import { parseProjectKey, readSessionToken, type SessionClaims } from './auth.ts';
import { sessionKeys, sessionStandingIn, type AccountRecord } from './db/accounts.ts';
import { batchGetItems, type Db, type ItemsRead, type TableKey } from './db/client.ts';
import { toRecord, type ProjectRecord } from './db/projects.ts';
import { keys } from './db/table.ts';
import { errors, type ServiceError } from './errors.ts';

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
 * The claims of a session token where only a session is accepted (contract "Authentication"): a
 * project key is 401, as is a token whose signature or lifetime fails. Not yet whether it stands.
 */
export async function sessionClaims(secret: string, token: string): Promise<SessionClaims> {
  if (parseProjectKey(token)) throw errors.unauthenticated('a project key is not accepted here: use a session token');
  return readSessionToken(secret, token);
}

/**
 * Reads the session's standing together with `extra` (the route's first items) in one round trip;
 * 401 when the account is gone, the session was signed out, or the secret was rotated since it was
 * issued. Nothing of `extra` should be used before this answers.
 */
export async function confirmSession(db: Db, claims: SessionClaims, extra: readonly TableKey[] = []): Promise<StandingSession> {
  const items = await batchGetItems(db, [...sessionKeys(claims.accountId, claims.sessionId), ...extra]);
  const { account, ended } = sessionStandingIn(items, claims.accountId, claims.sessionId);
  if (!account || ended || account.session_generation !== claims.generation) throw sessionEndedError();
  return { claims, account, items };
}

/**
 * The caller's project with `extra` items, read with the session's standing in one round trip;
 * 401 for a session that has ended, then 404 for a project that is absent or another account's
 * (contract "Authentication" 1: never a hint that it exists).
 */
export async function ownedProjectWith(db: Db, claims: SessionClaims, projectId: string, extra: readonly TableKey[] = []): Promise<{ project: ProjectRecord; items: ItemsRead }> {
  const { items } = await confirmSession(db, claims, [keys.project(projectId), ...extra]);
  const item = items.get(keys.project(projectId));
  if (!item || item.owner !== claims.accountId) throw errors.notFound(`project ${projectId} not found`);
  return { project: toRecord(item), items };
}
