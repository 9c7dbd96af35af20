/**
 * The shapes the handlers and the host agent exchange on the internal lifecycle API
 * (docs/lifecycle.md). Web-standard only: the handlers bundle imports it.
 */
import { z } from 'zod';
import { labelSchema } from './labels.ts';
import { projectStateSchema } from './projects.ts';
import { snapshotIdSchema } from './snapshots.ts';

/**
 * What the handler read from DynamoDB before calling the agent: the agent uses it as the expected
 * value of its conditional state write, and answers it unchanged when nothing had to change, so the
 * steady path costs the agent no read.
 */
export const recordedStateSchema = z.strictObject({ state: projectStateSchema, updated_at: z.string() });
/** A project's state as the handler read it. */
export type RecordedState = z.output<typeof recordedStateSchema>;

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
