/**
 * Routes: signup, sessions and the account (docs/api.md "Accounts" and "Sessions"; rules in
 * handlers/domain/accounts.ts).
 */
import { rotateSecretRequestSchema, sessionRequestSchema, signupRequestSchema } from '../../shared/schemas/accounts.ts';
import { requireStandingSession } from '../auth.ts';
import type { Routes } from '../context.ts';
import { describeAccount, openSession, rotateSecret, signOut, signUp } from '../domain/accounts.ts';
import { json, noInput, noQuery, readJson } from '../http.ts';

/** Answers that carry a secret or a session token are never stored by a cache (RFC 9111 §5.2.2.5). */
const NO_STORE = { 'cache-control': 'no-store' };

/** Registers the account routes. */
export function register(router: Routes): void {
  router.post('/v0/signup', async (request, ctx) => {
    const body = await readJson(request, signupRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    return json(await signUp(ctx.deps, { name: body.name, inviteCode: body.invite_code }), 201, NO_STORE);
  });

  router.post('/v0/sessions', async (request, ctx) => {
    const body = await readJson(request, sessionRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    return json(await openSession(ctx.deps, { accountId: body.account_id, accountSecret: body.account_secret }), 201, NO_STORE);
  });

  router.delete('/v0/sessions/current', async (request, ctx) => {
    const session = await requireStandingSession(request, ctx);
    await noInput(request);
    await signOut(ctx.deps, session);
    return new Response(null, { status: 204 });
  });

  router.get('/v0/me', async (request, ctx) => {
    const session = await requireStandingSession(request, ctx);
    await noInput(request);
    return json(await describeAccount(ctx.deps, session));
  });

  router.post('/v0/account/secret', async (request, ctx) => {
    const session = await requireStandingSession(request, ctx);
    noQuery(new URL(request.url));
    const body = await readJson(request, rotateSecretRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    return json(await rotateSecret(ctx.deps, { session, currentSecret: body.account_secret }), 200, NO_STORE);
  });
}
