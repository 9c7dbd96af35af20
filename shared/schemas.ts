/**
 * zod schemas of every resource and request body, shared by handlers and host agent. Patterns and
 * limits are the contract's ("Resources and their fields", "Limits"); where it says "not shown",
 * docs/api.md records what we chose.
 */
import { z } from 'zod';
import { ID_PATTERNS } from './ids.ts';

/** Engine version pin (contract "Versioning" 3). */
export const ENGINE_PIN = '3.0.0';
/** Data-plane prefix. */
export const DATA_PLANE = '/v2';

export const projectIdSchema = z.string().regex(ID_PATTERNS.prj, 'must match ^prj_[0-9a-f]{16}$');
export const accountIdSchema = z.string().regex(ID_PATTERNS.acct, 'must match ^acct_[0-9a-f]{16}$');
export const agentIdSchema = z.string().regex(ID_PATTERNS.agt, 'must match ^agt_[0-9a-f]{16}$');

/** True when `s` holds nothing but whitespace (Unicode White_Space, as JavaScript's `\s`). */
export function isBlank(s: string): boolean {
  return /^\s*$/u.test(s);
}

/**
 * Project (and account) name: 1 to 64 characters, no control characters, not only whitespace
 * (docs/api.md "Decisions"). Kept exactly as given: no trimming.
 */
export const projectNameSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(64, 'must be at most 64 characters')
  // eslint-disable-next-line no-control-regex
  .regex(/^[^\u0000-\u001f\u007f-\u009f]*$/, 'must not contain control characters')
  .refine((s) => !isBlank(s), 'must not be blank');

/** Labels of keys and snapshots: string or null, at most 64 characters, not blank (null says "no label"). */
export const labelSchema = z
  .string({ error: (issue) => (issue.input === undefined ? undefined : 'must be a string or null') })
  .max(64, 'must be at most 64 characters')
  .refine((s) => !isBlank(s), 'must not be blank')
  .nullable();

export const projectStateSchema = z.enum(['stopped', 'running', 'sleeping']);
export type ProjectState = z.output<typeof projectStateSchema>;

/** Project as answered (contract "Project"). */
export const projectSchema = z.object({
  id: projectIdSchema,
  name: z.string(),
  state: projectStateSchema,
  created_at: z.string(),
  updated_at: z.string(),
  native: z.object({ pin: z.literal(ENGINE_PIN), data_plane: z.literal(DATA_PLANE) }),
});
export type Project = z.output<typeof projectSchema>;

export const signupRequestSchema = z.strictObject({
  name: projectNameSchema.optional(),
  invite_code: z.string().max(256, 'must be at most 256 characters').optional(),
});

export const sessionRequestSchema = z.strictObject({
  account_id: accountIdSchema,
  account_secret: z.string().max(256, 'must be at most 256 characters'),
});

export const createProjectRequestSchema = z.strictObject({ name: projectNameSchema });

/** The one message of a bad `limit`. */
export const LIMIT_PROBLEM = 'must be a whole number from 1 to 1000';

/** `limit` of a list, as query text: a whole number from 1 to 1000 (docs/api.md "Decisions"). */
export const limitSchema = z
  .string()
  .refine((s) => /^\d{1,16}$/.test(s) && Number(s) >= 1 && Number(s) <= 1000, LIMIT_PROBLEM)
  .transform(Number);

/**
 * `cursor` of a list, as sent: opened (and judged) by shared/cursors.ts. Anything longer than any
 * cursor the service issues is not one of them.
 */
export const cursorSchema = z.string().max(16 * 1024, 'is not valid');

/** Query of every paginated list: `limit` and `cursor`, nothing else (docs/api.md "Decisions"). */
export const pageQuerySchema = z.strictObject({
  limit: limitSchema.optional(),
  cursor: cursorSchema.optional(),
});
