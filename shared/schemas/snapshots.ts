/** Snapshot inputs of the public API (the interface contract "POST snapshots", "POST restore"). */
import { z } from 'zod';
import { ID_PATTERNS } from '../ids.ts';
import { labelSchema } from './labels.ts';

/** A snapshot id. */
export const snapshotIdSchema = z.string().regex(ID_PATTERNS.snap, 'must match ^snap_[0-9a-f]{16}$');

/** `POST /v0/projects/{id}/snapshots`: `label` optional, string or null, at most 64 characters. */
export const createSnapshotRequestSchema = z.strictObject({ label: labelSchema.optional() });

/** `POST /v0/projects/{id}/restore`. */
export const restoreRequestSchema = z.strictObject({ snapshot_id: snapshotIdSchema });
