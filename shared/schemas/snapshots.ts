/** Snapshot inputs of the public API (the interface contract "POST snapshots", "POST restore"). */
import { z } from 'zod';
import { ID_PATTERNS } from '../ids.ts';
import { timestampSchema } from './common.ts';
import { labelSchema } from './labels.ts';
import { pageAnswerSchema } from './pagination.ts';

/** A snapshot id. */
export const snapshotIdSchema = z.string().regex(ID_PATTERNS.snap, 'must match ^snap_[0-9a-f]{16}$');

/** `POST /v0/projects/{id}/snapshots`: `label` optional, string or null, at most 64 characters. */
export const createSnapshotRequestSchema = z.strictObject({ label: labelSchema.optional() });

/** `POST /v0/projects/{id}/restore`. */
export const restoreRequestSchema = z.strictObject({ snapshot_id: snapshotIdSchema });

/**
 * The name of a directory under a tenant's `replaced/` (docs/lifecycle.md "Previous data
 * directories"): one path segment of letters, digits, `.`, `_` and `-`, not starting with `.`, at
 * most 128 characters. Restore names them `<UTC stamp>-<snapshot_id>`; the wider pattern admits any
 * other name a directory there may have, and nothing that could leave `replaced/` (`/`, `..`, a
 * leading dot, NUL, `\`).
 */
export const replacedNameSchema = z
  .string()
  .regex(/^[0-9A-Za-z][0-9A-Za-z._-]{0,127}$/, 'must be a directory name answered by GET …/replaced (letters, digits, ".", "_", "-"; not starting with ".")');

// Answers

/** The engine's status snapshot as a snapshot records it (the interface contract "Snapshot" `lineage`). */
export const snapshotLineageSchema = z.object({
  catalog_version: z.int(),
  directory_lineage: z.string(),
  logical_time_micros: z.int(),
  root_digest: z.string(),
  visible_csn: z.int(),
});

/** The engine's backup output as a snapshot records it (the interface contract "Snapshot" `backup`). */
export const snapshotBackupSchema = z.object({
  backup_path: z.string(),
  checkpoint_digest: z.string(),
  file_count: z.int(),
  total_bytes: z.int(),
  status: z.enum(['created', 'verified']),
  visible_csn: z.int(),
});

/**
 * The off-machine copy of a snapshot (docs/lifecycle.md "Off-machine copies"): `pending` until it is
 * complete and checked against the manifest, `complete` from then on (`completed_at`), `unavailable`
 * on an agent without a backup store.
 */
export const offsiteSchema = z.object({
  state: z.enum(['pending', 'complete', 'unavailable']),
  completed_at: timestampSchema.nullable(),
});

/** A snapshot (the interface contract "Snapshot"), with its off-machine state. */
export const snapshotSchema = z.object({
  id: snapshotIdSchema,
  project: z.string().regex(ID_PATTERNS.prj),
  label: z.string().nullable(),
  created_at: timestampSchema,
  engine_version: z.string(),
  source_data_dir: z.string(),
  backup_dir: z.string(),
  lineage: snapshotLineageSchema,
  backup: snapshotBackupSchema,
  offsite: offsiteSchema,
  /** Taken by the agent after a sleep (label `auto`), and deleted past the project's `backup.keep` (docs/lifecycle.md "Automatic sleep and backups"). */
  automatic: z.boolean(),
});

/** Answer of `GET …/snapshots`, newest first. */
export const snapshotListSchema = pageAnswerSchema('snapshots', snapshotSchema);

/**
 * A previous data directory restore moved aside (docs/lifecycle.md "Previous data directories"):
 * answered by `GET …/replaced` and, as it was, by `DELETE …/replaced/{name}`.
 */
export const replacedDirSchema = z.object({
  name: replacedNameSchema,
  /** Absolute path on the host agent's machine, as the restore answer's `replaced_dir` named it. */
  path: z.string(),
  /** When restore moved it aside. */
  moved_at: timestampSchema,
  /** The snapshot whose restore replaced it; null for a directory whose name does not say. */
  snapshot_id: snapshotIdSchema.nullable(),
  /** Bytes of the files in it: what freeing it gives back. */
  bytes: z.int().nonnegative(),
});

/** Answer of `GET …/replaced`, newest first. */
export const replacedListSchema = pageAnswerSchema('replaced', replacedDirSchema);

/**
 * Answer of `POST …/restore` (the interface contract "POST /v0/projects/{id}/restore"; the names
 * it leaves open are docs/lifecycle.md's): `restored_at` the completion time, `replaced_dir` where
 * the previous directory was moved (null when there was none), `native` the engine's outputs.
 */
export const restoreAnswerSchema = z.object({
  state: z.enum(['stopped', 'running', 'sleeping']),
  snapshot_id: snapshotIdSchema,
  restored_at: timestampSchema,
  data_dir: z.string(),
  replaced_dir: z.string().nullable(),
  native: z.object({
    restore: z.looseObject({ status: z.literal('restored') }),
    backup: snapshotBackupSchema,
  }),
});

/**
 * Answer of `POST …/import` (docs/lifecycle.md "Export and import"): the restore answer of the
 * snapshot the archive became, and that snapshot.
 */
export const importAnswerSchema = restoreAnswerSchema.extend({ snapshot: snapshotSchema });
