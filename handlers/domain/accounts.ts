/** Accounts: signup (gated by invite codes when the deployment has any) and sessions (docs/api.md). */
import { issueSessionToken, newAccountSecret, verifierOf, verifySecret } from '../../shared/auth.ts';
import { inviteCodes } from '../../shared/config.ts';
import { anyInvites, createAccount, getAccount, inviteExists } from '../../shared/db/accounts.ts';
import { errors } from '../../shared/errors.ts';
import { newId } from '../../shared/ids.ts';
import { nowIso } from '../../shared/time.ts';
import type { Deps } from '../context.ts';

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

/** True when the invite code admits a signup on this deployment (or the deployment is open). */
async function inviteAdmits(deps: Deps, code: string | undefined): Promise<boolean> {
  const configured = inviteCodes(deps.settings);
  const gated = configured.length > 0 || (await anyInvites(deps.db));
  if (!gated) return true;
  if (code === undefined || code === '') return false;
  return configured.includes(code) || (await inviteExists(deps.db, code));
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
  const session = await issueSessionToken(settings.SVCD_SESSION_SECRET, accountId, settings.SVCD_SESSION_TTL, deps.now());
  return { account_id: accountId, account_secret: accountSecret, token: session.token, expires_at: nowIso(session.expiresAt.getTime()) };
}

/** Opens a session for an account that proves its secret; 401 otherwise. */
export async function openSession(deps: Deps, input: { accountId: string; accountSecret: string }): Promise<Session> {
  const { settings, db } = deps;
  const account = await getAccount(db, input.accountId);
  // One answer for "no such account" and "wrong secret": nothing to tell an attacker apart.
  const ok = account !== null && (await verifySecret(settings.SVCD_KEY_PEPPER, input.accountSecret, account.secret_verifier));
  if (!ok) throw errors.unauthenticated('account_id or account_secret is wrong');
  const session = await issueSessionToken(settings.SVCD_SESSION_SECRET, input.accountId, settings.SVCD_SESSION_TTL, deps.now());
  return { token: session.token, expires_at: nowIso(session.expiresAt.getTime()) };
}
