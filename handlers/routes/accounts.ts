/**
 * Routes: signup, sessions and the account (docs/api.md "Accounts" and "Sessions"; declared in
 * shared/api/accounts.ts, rules in handlers/domain/accounts.ts).
 */
import { accounts } from '../../shared/api/index.ts';
import { requireStandingSession } from '../auth.ts';
import { describeAccount, openSession, rotateSecret, signOut, signUp } from '../domain/accounts.ts';
import { json } from '../http.ts';
import type { Ctx } from '../context.ts';
import { implement, type Routed } from '../implement.ts';

/** Answers that carry a secret or a session token are never stored by a cache (RFC 9111 §5.2.2.5). */
const NO_STORE = { 'cache-control': 'no-store' };

/** The session that stands (with no extra items to read beside it). */
const standing = (request: Routed, ctx: Ctx) => requireStandingSession(request, ctx);

export const implementations = [
  implement(accounts.signup, async ({ body }, ctx) => json(await signUp(ctx.deps, { name: body.name, inviteCode: body.invite_code }), 201, NO_STORE)),

  implement(accounts.openSession, async ({ body }, ctx) =>
    json(await openSession(ctx.deps, { accountId: body.account_id, accountSecret: body.account_secret }), 201, NO_STORE),
  ),

  implement(accounts.signOut, standing, async ({ caller }, ctx) => {
    await signOut(ctx.deps, caller);
    return new Response(null, { status: 204 });
  }),

  implement(accounts.me, standing, async ({ caller }, ctx) => json(await describeAccount(ctx.deps, caller))),

  implement(accounts.rotateSecret, standing, async ({ caller, body }, ctx) =>
    json(await rotateSecret(ctx.deps, { session: caller, currentSecret: body.account_secret }), 200, NO_STORE),
  ),
];
