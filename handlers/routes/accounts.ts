/** Routes: signup and sessions (contract "Accounts and session tokens"; rules in handlers/domain/accounts.ts). */
import { sessionRequestSchema, signupRequestSchema } from '../../shared/schemas/accounts.ts';
import type { Routes } from '../context.ts';
import { openSession, signUp } from '../domain/accounts.ts';
import { json, readJson } from '../http.ts';

/** Registers the account routes. */
export function register(router: Routes): void {
  router.post('/v0/signup', async (request, ctx) => {
    const body = await readJson(request, signupRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    return json(await signUp(ctx.deps, { name: body.name, inviteCode: body.invite_code }), 201);
  });

  router.post('/v0/sessions', async (request, ctx) => {
    const body = await readJson(request, sessionRequestSchema, ctx.deps.settings.SVCD_JSON_MAX_BYTES);
    return json(await openSession(ctx.deps, { accountId: body.account_id, accountSecret: body.account_secret }), 201);
  });
}
