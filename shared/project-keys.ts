/**
 * Verifying a presented project key against DynamoDB (the interface contract "Authentication" 2–3;
 * docs/dataplane.md "Keys"). Web-standard APIs only, so handlers (realtime subscribe with a project
 * key) and the host agent (the `/v2` cold path) share it. The agent keeps the answers in its own cache
 * (host-agent/dataplane/key-cache.ts); this module keeps nothing.
 */
import { parseProjectKey, verifySecret, type ParsedKey } from './auth.ts';
import type { Db } from './db/client.ts';
import { lookupKey, type KeyLookup } from './db/keys.ts';
import { errors } from './errors.ts';

/** A key that verified: its id and the one project it selects. */
export interface VerifiedKey {
  keyId: string;
  projectId: string;
}

/**
 * The one 401 message for every rejected key (unknown id, wrong secret, revoked): the caller learns
 * nothing about which key ids exist, and no part of the presented token is ever echoed.
 */
export const KEY_REJECTED = 'the project key is unknown, wrong or revoked';

/**
 * Judges a presented key against its lookup item (null: no such key id). Answers the project, or
 * throws 401. The comparison is constant-time (shared/auth.ts verifySecret).
 */
export async function judgeKey(pepper: string, presented: ParsedKey, stored: KeyLookup | null): Promise<VerifiedKey> {
  if (!stored || stored.key_id !== presented.keyId) throw errors.unauthenticated(KEY_REJECTED);
  const ok = await verifySecret(pepper, presented.secret, stored.verifier);
  if (!ok || stored.revoked_at !== null) throw errors.unauthenticated(KEY_REJECTED);
  return { keyId: stored.key_id, projectId: stored.project };
}

/**
 * Verifies a bearer token (already taken from exactly one `Authorization` header by
 * shared/auth.ts parseBearer) as a project key: one strongly consistent read of the key's lookup
 * item. Anything that is not an active project key — a session token included — is 401.
 */
export async function verifyProjectKey(db: Db, pepper: string, token: string): Promise<VerifiedKey> {
  const presented = parseProjectKey(token);
  if (!presented) throw errors.unauthenticated('a project key (svc1_<key_id>_<secret>) is required');
  return judgeKey(pepper, presented, await lookupKey(db, presented.keyId));
}
