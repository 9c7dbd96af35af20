/**
 * Projects as answered and created (the interface contract "Project", "POST /v0/projects"); where
 * the contract says "not shown", docs/api.md records what we chose.
 */
import { z } from 'zod';
import { ID_PATTERNS } from '../ids.ts';
import { timestampSchema } from './common.ts';
import { isBlank } from './labels.ts';
import { pageAnswerSchema } from './pagination.ts';

/** Engine version pin (the interface contract "Versioning" 3). */
export const ENGINE_PIN = '3.0.0';
/** Data-plane prefix. */
export const DATA_PLANE = '/v2';

/** A project id as a path parameter or a body field. */
export const projectIdSchema = z.string().regex(ID_PATTERNS.prj, 'must match ^prj_[0-9a-f]{16}$');

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

/** The states a project is recorded in (the interface contract "States and transitions"). */
export const projectStateSchema = z.enum(['stopped', 'running', 'sleeping']);
/** A recorded project state. */
export type ProjectState = z.output<typeof projectStateSchema>;

/** Longest idle time `auto_sleep_after_s` may name: 30 days (docs/lifecycle.md "Automatic sleep and backups"). */
export const AUTO_SLEEP_MAX_S = 30 * 24 * 3600;

/**
 * `auto_sleep_after_s`: seconds without `/v2` traffic after which the agent sleeps a running tenant,
 * or null (off, the default). The lower bound is the deployment's `SVCD_AUTO_SLEEP_MIN_S` (60 by
 * default), checked by the handlers (docs/lifecycle.md "Automatic sleep and backups").
 */
export const autoSleepSchema = z.int().min(1).max(AUTO_SLEEP_MAX_S).nullable();

/** `backup`: an automatic snapshot at each sleep that follows writes, keeping the newest `keep` (default 7); null: off. */
export const backupPolicySchema = z.strictObject({ on_sleep: z.boolean(), keep: z.int().min(1).max(100).default(7) }).nullable();
/** A project's automatic-backup setting as stored and answered. */
export type BackupPolicy = z.output<typeof backupPolicySchema>;

/** Project as answered (the interface contract "Project"). */
export const projectSchema = z.object({
  id: projectIdSchema,
  name: z.string(),
  state: projectStateSchema,
  created_at: timestampSchema,
  updated_at: timestampSchema,
  native: z.object({ pin: z.literal(ENGINE_PIN), data_plane: z.literal(DATA_PLANE) }),
  /** The recovery point: when the newest snapshot with a complete off-machine copy was taken; null: none (docs/lifecycle.md "Off-machine copies"). */
  last_backup_at: timestampSchema.nullable(),
  /** The off-machine state of the newest snapshot's copy; null: the project has no snapshot. */
  last_backup_offsite: z.enum(['pending', 'complete', 'unavailable']).nullable(),
  auto_sleep_after_s: z.int().nullable(),
  backup: z.object({ on_sleep: z.boolean(), keep: z.int() }).nullable(),
  /** The host agent serving the project now (docs/durability.md "Relocation"). */
  agent_id: z.string(),
  /** Set once the project was brought back from an off-machine copy after its agent was lost (docs/durability.md "Agent loss"). */
  restored_from: z
    .object({
      snapshot_id: z.string().nullable(),
      snapshot_created_at: timestampSchema.nullable(),
      at: timestampSchema,
      reason: z.literal('agent_lost'),
      lost_agent: z.string(),
    })
    .nullable(),
});
/** A project as answered. */
export type Project = z.output<typeof projectSchema>;

/** Body of `POST /v0/projects`. */
export const createProjectRequestSchema = z.strictObject({
  name: projectNameSchema,
  /** A fork (docs/durability.md "Fork"): the new project's data is this snapshot of a project the caller owns. */
  from_snapshot: z.string().regex(ID_PATTERNS.snap, 'a snapshot id: snap_ + 16 hex').optional(),
  /** The project `from_snapshot` belongs to (optional: found among the caller's projects otherwise). */
  from_project: projectIdSchema.optional(),
});

/** Body of `POST /v0/projects/{id}/relocate`: the agent to move to (optional). */
export const relocateRequestSchema = z.strictObject({ target_agent: z.string().regex(ID_PATTERNS.agt, 'an agent id: agt_ + 16 hex').optional() });

/**
 * Body of `PATCH /v0/projects/{id}`: a new name (under the rule of creation), the automatic sleep
 * and the automatic backups; at least one of them.
 */
export const renameProjectRequestSchema = z
  .strictObject({ name: projectNameSchema.optional(), auto_sleep_after_s: autoSleepSchema.optional(), backup: backupPolicySchema.optional() })
  .refine((b) => b.name !== undefined || b.auto_sleep_after_s !== undefined || b.backup !== undefined, {
    path: ['name'],
    message: 'a name, auto_sleep_after_s or backup is required',
  });

/** `GET /v0/projects`: a page of the caller's projects. */
export const projectListSchema = pageAnswerSchema('projects', projectSchema);
