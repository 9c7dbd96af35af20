/**
 * zod schemas of every resource and request body, shared by handlers and host agent. Patterns and
 * limits are the contract's ("Resources and their fields", "Limits"); where it says "not shown" they
 * are DESIGN §3's.
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

/** Project name: 1 to 64 characters, no control characters (DESIGN §3 "Limits not shown"). */
export const projectNameSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(64, 'must be at most 64 characters')
  // eslint-disable-next-line no-control-regex
  .regex(/^[^\u0000-\u001f\u007f-\u009f]*$/, 'must not contain control characters');

/** Labels of keys and snapshots: string or null, at most 64 characters. */
export const labelSchema = z.string().max(64, 'must be at most 64 characters').nullable();

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
  name: z.string().max(64, 'must be at most 64 characters').optional(),
  invite_code: z.string().max(256, 'must be at most 256 characters').optional(),
});

export const sessionRequestSchema = z.strictObject({
  account_id: accountIdSchema,
  account_secret: z.string().max(256, 'must be at most 256 characters'),
});

export const createProjectRequestSchema = z.strictObject({ name: projectNameSchema });

/** Query of every paginated list (DESIGN §3: `limit` 1–1000, `cursor`). */
export const pageQuerySchema = z.object({
  limit: z.coerce.number().int('must be an integer').min(1, 'must be at least 1').max(1000, 'must be at most 1000').optional(),
  cursor: z.string().max(2048, 'is too long').optional(),
});
