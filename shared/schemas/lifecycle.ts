/**
 * Request bodies of the lifecycle routes (contract "POST snapshots", "POST restore") and the shapes
 * the handlers and the host agent exchange for them on the internal API (docs/lifecycle.md "Internal
 * API"). Web-standard only: the handlers bundle imports it.
 */
import { z } from 'zod';
import { ID_PATTERNS } from '../ids.ts';
import { labelSchema, projectStateSchema } from '../schemas.ts';

export const snapshotIdSchema = z.string().regex(ID_PATTERNS.snap, 'must match ^snap_[0-9a-f]{16}$');

/** `POST /v0/projects/{id}/snapshots`: `label` optional, string or null, at most 64 characters. */
export const createSnapshotRequestSchema = z.strictObject({ label: labelSchema.optional() });

/** `POST /v0/projects/{id}/restore`. */
export const restoreRequestSchema = z.strictObject({ snapshot_id: snapshotIdSchema });

/**
 * What the handler read from DynamoDB before calling the agent: the agent uses it as the expected
 * value of its conditional state write, and answers it unchanged when nothing had to change, so the
 * steady path costs the agent no read.
 */
export const recordedStateSchema = z.strictObject({ state: projectStateSchema, updated_at: z.string() });
export type RecordedState = z.output<typeof recordedStateSchema>;

// Internal API (handlers → host agent)

/** Internal body of wakeup, sleep, reconcile and head. */
export const tenantCallSchema = z.strictObject({ recorded: recordedStateSchema });

/** Internal body of snapshot creation. */
export const internalSnapshotSchema = z.strictObject({ recorded: recordedStateSchema, label: labelSchema.optional() });

/** Internal body of restore. */
export const internalRestoreSchema = z.strictObject({ recorded: recordedStateSchema, snapshot_id: snapshotIdSchema });

/** The agent's answer to wakeup, sleep and reconcile: the project's state as now recorded. */
export interface TenantStateAnswer {
  state: z.output<typeof projectStateSchema>;
  updated_at: string;
}
