/** Signup and session bodies (the interface contract "Accounts and session tokens"; docs/api.md). */
import { z } from 'zod';
import { ID_PATTERNS } from '../ids.ts';
import { timestampSchema } from './common.ts';
import { projectNameSchema } from './projects.ts';

/** An account id. */
export const accountIdSchema = z.string().regex(ID_PATTERNS.acct, 'must match ^acct_[0-9a-f]{16}$');

/** Body of `POST /v0/signup`: an optional name (as a project's) and invite code. */
export const signupRequestSchema = z.strictObject({
  name: projectNameSchema.optional(),
  invite_code: z.string().max(256, 'must be at most 256 characters').optional(),
});

/** Body of `POST /v0/sessions`. */
export const sessionRequestSchema = z.strictObject({
  account_id: accountIdSchema,
  account_secret: z.string().max(256, 'must be at most 256 characters'),
});

/** Answer of `POST /v0/signup`: the account secret is shown here only. */
export const signupAnswerSchema = z.object({
  account_id: accountIdSchema,
  account_secret: z.string(),
  token: z.string(),
  expires_at: timestampSchema,
});

/** Answer of `POST /v0/sessions`. */
export const sessionAnswerSchema = z.object({ token: z.string(), expires_at: timestampSchema });

/** Body of `POST /v0/account/secret`: the current secret, confirming the rotation (docs/api.md "Sessions"). */
export const rotateSecretRequestSchema = z.strictObject({
  account_secret: z.string().max(256, 'must be at most 256 characters'),
});

/** Answer of `GET /v0/me`: the account of the session, never its secret. */
export const meAnswerSchema = z.object({
  account_id: accountIdSchema,
  name: z.string().nullable(),
  created_at: timestampSchema,
  project_count: z.number().int().nonnegative(),
  secret_rotated_at: timestampSchema.nullable(),
});

/** Answer of `POST /v0/account/secret`: the new secret is shown here only, with a session that stands after the rotation. */
export const rotatedSecretAnswerSchema = signupAnswerSchema.extend({ rotated_at: timestampSchema });
