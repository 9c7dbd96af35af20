/**
 * What the SDK sends and receives, typed from the zod schemas the service validates its inputs with
 * and describes its answers with (shared/schemas/; docs/api.md "How the reference is made"), so the
 * SDK's types and the service's answers cannot drift apart.
 */
import type { z } from 'zod';
import type {
  meAnswerSchema,
  rotatedSecretAnswerSchema,
  sessionAnswerSchema,
  sessionRequestSchema,
  signupAnswerSchema,
  signupRequestSchema,
} from '../shared/schemas/accounts.ts';
import type { functionListSchema, functionLogsSchema, functionSchema, functionVersionListSchema, functionVersionSchema } from '../shared/schemas/functions.ts';
import type { degradedHealthAnswerSchema, healthAnswerSchema } from '../shared/schemas/health.ts';
import type { createKeyRequestSchema, issuedKeySchema, keyListSchema, keySchema } from '../shared/schemas/keys.ts';
import type { headAnswerSchema } from '../shared/schemas/lifecycle.ts';
import type { logsAnswerSchema } from '../shared/schemas/logs.ts';
import type { createProjectRequestSchema, projectListSchema, projectSchema, projectStateSchema, renameProjectRequestSchema } from '../shared/schemas/projects.ts';
import type { publishRequestSchema, realtimeEventSchema, realtimeTicketSchema } from '../shared/schemas/realtime.ts';
import type { receiptListSchema, receiptSchema } from '../shared/schemas/receipts.ts';
import type { secretListSchema, secretMetadataSchema } from '../shared/schemas/secrets.ts';
import type {
  createSnapshotRequestSchema,
  replacedDirSchema,
  replacedListSchema,
  restoreAnswerSchema,
  snapshotBackupSchema,
  snapshotLineageSchema,
  snapshotListSchema,
  snapshotSchema,
} from '../shared/schemas/snapshots.ts';
import type {
  bucketListSchema,
  bucketSchema,
  downloadTicketRequestSchema,
  downloadTicketSchema,
  objectListSchema,
  objectRowSchema,
  uploadTicketRequestSchema,
  uploadTicketSchema,
} from '../shared/schemas/storage.ts';

// Inputs

/** Body of project creation. */
export type CreateProjectInput = z.input<typeof createProjectRequestSchema>;
/** Body of a project's rename. */
export type RenameProjectInput = z.input<typeof renameProjectRequestSchema>;
/** Body of signup. */
export type SignupInput = z.input<typeof signupRequestSchema>;
/** Body of a new session. */
export type SessionInput = z.input<typeof sessionRequestSchema>;
/** Body of key creation. */
export type CreateKeyInput = z.input<typeof createKeyRequestSchema>;
/** Body of snapshot creation. */
export type CreateSnapshotInput = z.input<typeof createSnapshotRequestSchema>;
/** Body of an upload ticket request. */
export type UploadTicketInput = z.input<typeof uploadTicketRequestSchema>;
/** Body of a download ticket request (`signed: true` adds a URL usable without the session). */
export type DownloadTicketInput = z.input<typeof downloadTicketRequestSchema>;
/** Body of a realtime publish. */
export type PublishInput = z.input<typeof publishRequestSchema>;

/** Every list answers one page and the cursor of the next (docs/api.md "Decisions"). */
export interface PageInput {
  /** 1 to 1000, default 100. */
  limit?: number;
  /** The `next_cursor` of a previous page. */
  cursor?: string;
}

// Answers

/** Signup's answer: the account secret is shown here only. */
export type SignedUp = z.output<typeof signupAnswerSchema>;
/** A session. */
export type Session = z.output<typeof sessionAnswerSchema>;
/** The account of the session (`GET /v0/me`). */
export type Me = z.output<typeof meAnswerSchema>;
/** A rotated account secret, shown once, with a session that stands after the rotation. */
export type RotatedSecret = z.output<typeof rotatedSecretAnswerSchema>;
/** `GET /v0/health`: `ok`, or `degraded` with the error envelope when no host agent can run tenants. */
export type Health = z.output<typeof healthAnswerSchema> | z.output<typeof degradedHealthAnswerSchema>;

/** A project (contract "Project"). */
export type Project = z.output<typeof projectSchema>;
/** A project's state. */
export type ProjectState = z.output<typeof projectStateSchema>;
/** A page of projects. */
export type ProjectsPage = z.output<typeof projectListSchema>;
/** What head answers: a live probe or the offline status (contract "GET /v0/projects/{id}/head"). */
export type Head = z.output<typeof headAnswerSchema>;
/** The engine's recent log lines. */
export type EngineLogs = z.output<typeof logsAnswerSchema>;

/** A snapshot (contract "Snapshot"). */
export type Snapshot = z.output<typeof snapshotSchema>;
/** The engine's status snapshot in a snapshot. */
export type SnapshotLineage = z.output<typeof snapshotLineageSchema>;
/** The engine's backup output in a snapshot. */
export type SnapshotBackup = z.output<typeof snapshotBackupSchema>;
/** A page of snapshots, newest first. */
export type SnapshotsPage = z.output<typeof snapshotListSchema>;
/** Restore's answer. */
export type Restored = z.output<typeof restoreAnswerSchema>;
/** A previous data directory restore moved aside. */
export type ReplacedDir = z.output<typeof replacedDirSchema>;
/** A page of previous data directories, newest first. */
export type ReplacedPage = z.output<typeof replacedListSchema>;

/** A key as issued: `key` is the secret, shown once. */
export type IssuedKey = z.output<typeof issuedKeySchema>;
/** A key as listed or revoked: never the secret. */
export type KeyRecord = z.output<typeof keySchema>;
/** A page of keys. */
export type KeysPage = z.output<typeof keyListSchema>;

/** A bucket (contract "Bucket record"). */
export type Bucket = z.output<typeof bucketSchema>;
/** A page of buckets. */
export type BucketsPage = z.output<typeof bucketListSchema>;
/** An object's catalog row (contract "Object catalog row"). */
export type ObjectRow = z.output<typeof objectRowSchema>;
/** A page of a bucket's objects, sorted by key, with the common prefixes of a delimited listing. */
export type ObjectsPage = z.output<typeof objectListSchema>;
/** An upload ticket. */
export type UploadTicket = z.output<typeof uploadTicketSchema>;
/** A download ticket. */
export type DownloadTicket = z.output<typeof downloadTicketSchema>;

/** A realtime event as delivered (contract "Realtime event as delivered"). */
export type RealtimeEvent = z.output<typeof realtimeEventSchema>;
/** A single-use subscription ticket for a browser's EventSource. */
export type RealtimeTicket = z.output<typeof realtimeTicketSchema>;

/** A function secret's metadata: never its value. */
export type SecretMetadata = z.output<typeof secretMetadataSchema>;
/** A page of secrets, by name. */
export type SecretsPage = z.output<typeof secretListSchema>;

/** A receipt. */
export type Receipt = z.output<typeof receiptSchema>;
/** A page of receipts, newest first. */
export type ReceiptsPage = z.output<typeof receiptListSchema>;

/** A function: its current version and that version's settings. */
export type FunctionInfo = z.output<typeof functionSchema>;
/** One deployed version of a function. */
export type FunctionVersion = z.output<typeof functionVersionSchema>;
/** A page of functions. */
export type FunctionsPage = z.output<typeof functionListSchema>;
/** A page of a function's versions, newest first. */
export type FunctionVersionsPage = z.output<typeof functionVersionListSchema>;
/** A function's last console lines, secrets redacted. */
export type FunctionLogs = z.output<typeof functionLogsSchema>;

/** A hit of `/v2/search`: its rowid, rank, snippet and the table's columns (docs/engine.md "POST /v2/search"). */
export interface SearchHit {
  rowid: number;
  rank: number;
  snippet: string;
  [column: string]: unknown;
}

/** The engine's capabilities (docs/engine.md "GET /v2/capabilities"). */
export interface Capabilities {
  engine_version: string;
  protocol_minor: number;
  features: string[];
  max_body_bytes: number;
  [field: string]: unknown;
}
