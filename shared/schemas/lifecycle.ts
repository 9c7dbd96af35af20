/**
 * The shapes the handlers and the host agent exchange on the internal lifecycle API
 * (docs/lifecycle.md). Web-standard only: the handlers bundle imports it.
 */
import { z } from 'zod';
import { labelSchema } from './labels.ts';
import { projectStateSchema } from './projects.ts';
import { ID_PATTERNS } from '../ids.ts';
import { limitSchema } from './pagination.ts';
import { replacedDirSchema, replacedNameSchema, snapshotIdSchema, snapshotLineageSchema } from './snapshots.ts';
import { timestampSchema } from './common.ts';

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

/**
 * Who asks for a deletion the agent receipts (docs/api.md "Receipts"): the owner's account id and
 * the request id of the public request. Internal body of `DELETE …/snapshots/{snapshot_id}` and
 * `DELETE …/replaced/{name}`.
 */
export const internalDeletionSchema = z.strictObject({
  actor: z.string().regex(ID_PATTERNS.acct, 'must match ^acct_[0-9a-f]{16}$'),
  request_id: z.string().min(1).max(64),
});
/** A deletion's receipt fields as the handler sends them. */
export type InternalDeletion = z.output<typeof internalDeletionSchema>;

/** Internal query of `GET …/replaced`: a page size and the name after which the page starts. */
export const internalReplacedQuerySchema = z.strictObject({
  limit: limitSchema,
  after: replacedNameSchema.optional(),
});

/** A directory under a tenant's `replaced/` as answered (./snapshots.ts `replacedDirSchema`). */
export type ReplacedDir = z.output<typeof replacedDirSchema>;

/** The agent's page of `GET …/replaced`: `next` is the last name answered when more follow. */
export interface ReplacedPage {
  items: ReplacedDir[];
  next: string | null;
}

/** The agent's answer to wakeup, sleep and reconcile: the project's state as now recorded. */
export interface TenantStateAnswer {
  state: z.output<typeof projectStateSchema>;
  updated_at: string;
}

// Answers

/** What both kinds of head answer carry (the interface contract "GET /v0/projects/{id}/head"). */
const headCommon = {
  state: projectStateSchema,
  /** The engine's version output, as it printed it (null when the pin check could not run it). */
  engine: z.record(z.string(), z.unknown()).nullable(),
  timestamp: timestampSchema,
};

/** Answer of head: a live probe of a running engine, or the offline status of a sleeping one. */
export const headAnswerSchema = z.discriminatedUnion('source', [
  z.object({
    ...headCommon,
    source: z.literal('live_probe'),
    endpoint: z.object({ data_plane: z.literal('/v2'), address: z.string(), host: z.string(), port: z.int() }),
    protocol_minor: z.union([z.int(), z.string()]).nullable(),
    request_id: z.string().nullable(),
    capabilities: z.object({ status: z.int(), content_type: z.string().nullable(), body_base64: z.string() }),
  }),
  z.object({
    ...headCommon,
    source: z.literal('offline_status'),
    endpoint: z.object({ data_plane: z.literal('/v2'), address: z.null() }),
    /** The engine's status snapshot, field names its own. */
    lineage: z.looseObject(snapshotLineageSchema.shape),
    latest_snapshot: snapshotIdSchema.optional(),
  }),
]);
