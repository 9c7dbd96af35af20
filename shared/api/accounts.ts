/** Declarations: signup, sessions and the account (docs/api.md "Accounts" and "Sessions"). */
import {
  meAnswerSchema,
  rotatedSecretAnswerSchema,
  rotateSecretRequestSchema,
  sessionAnswerSchema,
  sessionRequestSchema,
  signupAnswerSchema,
  signupRequestSchema,
} from '../schemas/accounts.ts';
import { route } from './route.ts';

export const signup = route({
  method: 'POST',
  path: '/v0/signup',
  tag: 'accounts',
  summary: 'Create an account',
  description: 'Answers the account secret once (only a verifier is kept) and a first session token. On an invite-gated deployment a missing or unknown `invite_code` is 403.',
  access: 'none',
  body: { flow: 'json', schema: signupRequestSchema, optional: true },
  answers: { 201: { description: 'the account, its secret (shown once) and a session', json: signupAnswerSchema } },
  errors: [403, 409],
});

export const openSession = route({
  method: 'POST',
  path: '/v0/sessions',
  tag: 'accounts',
  summary: 'Open a session',
  description: 'An unknown account and a wrong secret answer the same 401.',
  access: 'none',
  body: { flow: 'json', schema: sessionRequestSchema },
  answers: { 201: { description: 'a session token', json: sessionAnswerSchema } },
  errors: [401],
});

export const signOut = route({
  method: 'DELETE',
  path: '/v0/sessions/current',
  tag: 'accounts',
  summary: 'Sign out: end the presented session',
  description: 'From the very next request on, the token is 401 on every route; the account\'s other sessions are untouched (docs/api.md "Sessions").',
  access: 'session',
  answers: { 204: { description: 'the session has ended' } },
});

export const me = route({
  method: 'GET',
  path: '/v0/me',
  tag: 'accounts',
  summary: 'The account of the session',
  description: 'Its id, name, creation time, number of projects and when its secret was last rotated; never the secret.',
  access: 'session',
  answers: { 200: { description: 'the account', json: meAnswerSchema } },
});

export const rotateSecret = route({
  method: 'POST',
  path: '/v0/account/secret',
  tag: 'accounts',
  summary: 'Rotate the account secret',
  description:
    'Confirmed by the current `account_secret` (a wrong one is 401). Answers the new secret, shown only here (only a verifier is kept), and a new session; ' +
    'every session issued before, the caller\'s included, is 401 from the next request on, and the old secret no longer opens one (docs/api.md "Sessions").',
  access: 'session',
  body: { flow: 'json', schema: rotateSecretRequestSchema },
  answers: { 200: { description: 'the new secret (shown once) and a session', json: rotatedSecretAnswerSchema } },
});

/** In the order they are matched. */
export const routes = [signup, openSession, signOut, me, rotateSecret] as const;
