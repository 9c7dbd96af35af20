/**
 * Accounts (docs/api.md "Accounts" and "Sessions"): signup (gated by invite codes when the
 * deployment has any), sessions opened with the account secret and ended by signing out or by a
 * rotation of that secret, and the account as its owner sees it.
 */
import { issueSessionToken, newAccountSecret, verifierOf, verifySecret } from '../../shared/auth.ts';
import { inviteCodes } from '../../shared/config.ts';
import { anyInvites, countProjects, createAccount, endSession, getAccount, inviteExists, rotateAccountSecret } from '../../shared/db/accounts.ts';
import { errors } from '../../shared/errors.ts';
import { newId } from '../../shared/ids.ts';
import { nowIso } from '../../shared/time.ts';
import type { Deps } from '../context.ts';
import { sessionEndedError, type StandingSession } from './sessions.ts';

/** What signup answers: the account, its secret (the only time it is shown) and a first session. */
export interface SignedUp {
  account_id: string;
  account_secret: string;
  token: string;
  expires_at: string;
}

/** A session token and when it expires. */
export interface Session {
  token: string;
  expires_at: string;
}

/** The account as its owner sees it (`GET /v0/me`). */
export interface Me {
  account_id: string;
  name: string | null;
  created_at: string;
  project_count: number;
  secret_rotated_at: string | null;
}

/** What a rotation answers: the new secret (the only time it is shown) and a session that stands after it. */
export interface Rotated extends SignedUp {
  rotated_at: string;
}

/** True when the invite code admits a signup on this deployment (or the deployment is open). */
async function inviteAdmits(deps: Deps, code: string | undefined): Promise<boolean> {
  const configured = inviteCodes(deps.settings);
  const gated = configured.length > 0 || (await anyInvites(deps.db));
  if (!gated) return true;
  if (code === undefined || code === '') return false;
  return configured.includes(code) || (await inviteExists(deps.db, code));
}

/** A new session of `accountId` at its session generation `generation`, as answered. */
async function newSession(deps: Deps, accountId: string, generation: number): Promise<Session> {
  const { settings } = deps;
  const session = await issueSessionToken(settings.SVCD_SESSION_SECRET, accountId, settings.SVCD_SESSION_TTL, deps.now(), generation);
  return { token: session.token, expires_at: nowIso(session.expiresAt.getTime()) };
}

/** Creates an account and opens its first session; 403 without an admitting invite code where one is required. */
export async function signUp(deps: Deps, input: { name?: string | undefined; inviteCode?: string | undefined }): Promise<SignedUp> {
  const { settings, db } = deps;
  if (!(await inviteAdmits(deps, input.inviteCode))) {
    throw errors.denied('invite_code: a valid invite code is required to sign up on this deployment');
  }
  const accountId = newId('acct');
  const accountSecret = newAccountSecret();
  await createAccount(db, {
    account_id: accountId,
    name: input.name ?? null,
    secret_verifier: await verifierOf(settings.SVCD_KEY_PEPPER, accountSecret),
    created_at: nowIso(deps.now()),
  });
  return { account_id: accountId, account_secret: accountSecret, ...(await newSession(deps, accountId, 0)) };
}

/**
 * Opens a session for an account that proves its secret; 401 otherwise. The session is issued at
 * the generation read with the verifier it was proven against, so one opened with a secret that a
 * concurrent rotation replaces has ended as soon as it is issued.
 */
export async function openSession(deps: Deps, input: { accountId: string; accountSecret: string }): Promise<Session> {
  const account = await getAccount(deps.db, input.accountId);
  // One answer for "no such account" and "wrong secret": nothing to tell an attacker apart.
  const ok = account !== null && (await verifySecret(deps.settings.SVCD_KEY_PEPPER, input.accountSecret, account.secret_verifier));
  if (!ok) throw errors.unauthenticated('account_id or account_secret is wrong');
  return newSession(deps, input.accountId, account.session_generation);
}

/** The account of a standing session, with its project count (kept with the projects; counted for an account older than the count). */
export async function describeAccount(deps: Deps, session: StandingSession): Promise<Me> {
  const { account } = session;
  return {
    account_id: account.account_id,
    name: account.name,
    created_at: account.created_at,
    project_count: account.project_count ?? (await countProjects(deps.db, account.account_id)),
    secret_rotated_at: account.secret_rotated_at,
  };
}

/** Ends the presented session: from the next request on, on every route, it is 401. */
export async function signOut(deps: Deps, session: StandingSession): Promise<void> {
  const { claims } = session;
  await endSession(deps.db, { accountId: claims.accountId, sessionId: claims.sessionId, endedAt: nowIso(deps.now()), expiresAt: claims.expiresAt });
}

/**
 * Replaces the account secret, confirmed by the current one, and ends every session issued before
 * (the caller's too), in one conditional write; answers the new secret, shown only here, and a new
 * session. 401 when the current secret is wrong, or when a concurrent rotation ended the caller's
 * session first.
 */
export async function rotateSecret(deps: Deps, input: { session: StandingSession; currentSecret: string }): Promise<Rotated> {
  const { settings } = deps;
  const { account, claims } = input.session;
  if (!(await verifySecret(settings.SVCD_KEY_PEPPER, input.currentSecret, account.secret_verifier))) {
    throw errors.unauthenticated('account_secret: is not the account secret');
  }
  const accountSecret = newAccountSecret();
  const rotatedAt = nowIso(deps.now());
  const generation = await rotateAccountSecret(deps.db, {
    accountId: account.account_id,
    verifier: await verifierOf(settings.SVCD_KEY_PEPPER, accountSecret),
    expectedGeneration: claims.generation,
    at: rotatedAt,
  });
  if (generation === null) throw sessionEndedError();
  return { account_id: account.account_id, account_secret: accountSecret, ...(await newSession(deps, account.account_id, generation)), rotated_at: rotatedAt };
}
