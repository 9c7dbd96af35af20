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
});
/** A project as answered. */
export type Project = z.output<typeof projectSchema>;

/** Body of `POST /v0/projects`. */
export const createProjectRequestSchema = z.strictObject({ name: projectNameSchema });

/** Body of `PATCH /v0/projects/{id}`: the new name, under the rule of creation. */
export const renameProjectRequestSchema = z.strictObject({ name: projectNameSchema });

/** `GET /v0/projects`: a page of the caller's projects. */
export const projectListSchema = pageAnswerSchema('projects', projectSchema);
