/** Routes: signup and sessions (DESIGN §3 "Accounts and session tokens"). */
import { issueSessionToken, newAccountSecret, verifierOf, verifySecret } from '../shared/auth.ts';
import { inviteCodes } from '../shared/config.ts';
import { anyInvites, createAccount, getAccount, inviteExists } from '../shared/db/accounts.ts';
import { errors } from '../shared/errors.ts';
import { newId } from '../shared/ids.ts';
import { sessionRequestSchema, signupRequestSchema } from '../shared/schemas.ts';
import { nowIso } from '../shared/time.ts';
import type { Ctx, Routes } from './context.ts';
import { json, readJson } from './http.ts';

/** True when the invite code admits a signup on this deployment (or the deployment is open). */
async function inviteAdmits(ctx: Ctx, code: string | undefined): Promise<boolean> {
  const { settings, db } = ctx.deps;
  const configured = inviteCodes(settings);
  const gated = configured.length > 0 || (await anyInvites(db));
  if (!gated) return true;
  if (code === undefined || code === '') return false;
  return configured.includes(code) || (await inviteExists(db, code));
}

/** Registers the account routes. */
export function register(router: Routes): void {
  router.post('/v0/signup', async (request, ctx) => {
    const { settings, db } = ctx.deps;
    const body = await readJson(request, signupRequestSchema, settings.SVCD_JSON_MAX_BYTES);
    if (!(await inviteAdmits(ctx, body.invite_code))) {
      throw errors.denied('invite_code: a valid invite code is required to sign up on this deployment');
    }
    const accountId = newId('acct');
    const accountSecret = newAccountSecret();
    await createAccount(db, {
      account_id: accountId,
      name: body.name ?? null,
      secret_verifier: await verifierOf(settings.SVCD_KEY_PEPPER, accountSecret),
      created_at: nowIso(ctx.deps.now()),
    });
    const session = await issueSessionToken(settings.SVCD_SESSION_SECRET, accountId, settings.SVCD_SESSION_TTL, ctx.deps.now());
    return json(
      { account_id: accountId, account_secret: accountSecret, token: session.token, expires_at: nowIso(session.expiresAt.getTime()) },
      201,
    );
  });

  router.post('/v0/sessions', async (request, ctx) => {
    const { settings, db } = ctx.deps;
    const body = await readJson(request, sessionRequestSchema, settings.SVCD_JSON_MAX_BYTES);
    const account = await getAccount(db, body.account_id);
    // One answer for "no such account" and "wrong secret": nothing to tell an attacker apart.
    const ok = account !== null && (await verifySecret(settings.SVCD_KEY_PEPPER, body.account_secret, account.secret_verifier));
    if (!ok) throw errors.unauthenticated('account_id or account_secret is wrong');
    const session = await issueSessionToken(settings.SVCD_SESSION_SECRET, body.account_id, settings.SVCD_SESSION_TTL, ctx.deps.now());
    return json({ token: session.token, expires_at: nowIso(session.expiresAt.getTime()) }, 201);
  });
}
