/**
 * What the SDK sends and receives. Inputs and the project come from the zod schemas the service
 * validates with (shared/schemas/); the other answers follow the interface contract
 * (docs/interface.md) and docs/*.md, and `types.test.ts` keeps them equal to the service's own types.
 */
import type { z } from 'zod';
import type { sessionRequestSchema, signupRequestSchema } from '../shared/schemas/accounts.ts';
import type { createKeyRequestSchema } from '../shared/schemas/keys.ts';
import type { publishRequestSchema } from '../shared/schemas/realtime.ts';
import type { createProjectRequestSchema, projectSchema, projectStateSchema } from '../shared/schemas/projects.ts';
import type { createSnapshotRequestSchema } from '../shared/schemas/snapshots.ts';
import type { downloadTicketRequestSchema, uploadTicketRequestSchema } from '../shared/schemas/storage.ts';

/** A project (contract "Project"). */
export type Project = z.output<typeof projectSchema>;
/** A project's state. */
export type ProjectState = z.output<typeof projectStateSchema>;
/** Body of project creation. */
export type CreateProjectInput = z.input<typeof createProjectRequestSchema>;
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
/** Body of a download ticket request. */
export type DownloadTicketInput = z.input<typeof downloadTicketRequestSchema>;
/** Body of a realtime publish. */
export type PublishInput = z.input<typeof publishRequestSchema>;

/** Signup's answer: the account secret is shown here only (docs/api.md "Accounts"). */
export interface SignedUp {
  account_id: string;
  account_secret: string;
  token: string;
  expires_at: string;
}

/** A session. */
export interface Session {
  token: string;
  expires_at: string;
}

/** `GET /v0/health`'s answer; `status` is `degraded` when no host agent can run tenants. */
export interface Health {
  status: 'ok' | 'degraded';
  time: string;
  agents: { live: number; total: number };
  error?: { code: string; message: string };
}

/** Every list answers one page and the cursor of the next (docs/api.md "Decisions"). */
export interface PageInput {
  /** 1 to 1000, default 100. */
  limit?: number;
  /** The `next_cursor` of a previous page. */
  cursor?: string;
}

/** A page of projects. */
export interface ProjectsPage {
  projects: Project[];
  next_cursor: string | null;
}

/** What head answers (contract "GET /v0/projects/{id}/head"; docs/lifecycle.md). */
export interface Head {
  state: ProjectState;
  source: 'live_probe' | 'offline_status';
  engine: Record<string, unknown>;
  endpoint: { data_plane: '/v2'; address: string | null; host?: string; port?: number };
  /** `live_probe` only. */
  protocol_minor?: number | string | null;
  /** `live_probe` only. */
  request_id?: string | null;
  /** `live_probe` only: the capabilities probe's answer, its body base64. */
  capabilities?: { status: number; content_type: string | null; body_base64: string };
  /** `offline_status` only. */
  lineage?: SnapshotLineage;
  /** `offline_status` and a snapshot exists. */
  latest_snapshot?: string;
  timestamp: string;
}

/** The engine's status snapshot (contract "Snapshot" `lineage`). */
export interface SnapshotLineage {
  catalog_version: number;
  directory_lineage: string;
  logical_time_micros: number;
  root_digest: string;
  visible_csn: number;
}

/** The engine's backup output (contract "Snapshot" `backup`). */
export interface SnapshotBackup {
  backup_path: string;
  checkpoint_digest: string;
  file_count: number;
  total_bytes: number;
  status: 'created' | 'verified';
  visible_csn: number;
}

/** A snapshot (contract "Snapshot"). */
export interface Snapshot {
  id: string;
  project: string;
  label: string | null;
  created_at: string;
  engine_version: string;
  source_data_dir: string;
  backup_dir: string;
  lineage: SnapshotLineage;
  backup: SnapshotBackup;
}

/** A page of snapshots, newest first. */
export interface SnapshotsPage {
  snapshots: Snapshot[];
  next_cursor: string | null;
}

/** Restore's answer (contract "POST /v0/projects/{id}/restore"; docs/lifecycle.md "Restore answer"). */
export interface Restored {
  state: ProjectState;
  snapshot_id: string;
  restored_at: string;
  data_dir: string;
  replaced_dir: string;
  native: { restore: Record<string, unknown> & { status: 'restored' }; backup: Record<string, unknown> & { status: 'created' | 'verified' } };
}

/** A key as issued: `key` is the secret, shown once. */
export interface IssuedKey {
  key_id: string;
  key: string;
  label: string | null;
  created_at: string;
}

/** A key as listed or revoked: never the secret. */
export interface KeyRecord {
  key_id: string;
  label: string | null;
  created_at: string;
  revoked_at: string | null;
}

/** A page of keys. */
export interface KeysPage {
  keys: KeyRecord[];
  next_cursor: string | null;
}

/** A bucket (contract "Bucket record"). */
export interface Bucket {
  project: string;
  name: string;
  created_at: string;
}

/** A page of buckets. */
export interface BucketsPage {
  buckets: Bucket[];
  next_cursor: string | null;
}

/** An object's catalog row (contract "Object catalog row"). */
export interface ObjectRow {
  id: string;
  project: string;
  bucket: string;
  key: string;
  size: number;
  etag: string;
  content_type: string;
  backend: 'fs' | 's3';
  state: 'pending' | 'stored';
  created_at: string;
  updated_at: string;
}

/** A page of a bucket's objects, sorted by key. */
export interface ObjectsPage {
  bucket: string;
  objects: ObjectRow[];
  next_cursor: string | null;
}

/** An upload ticket (contract "POST storage/uploads"). */
export interface UploadTicket {
  object_id: string;
  method: 'PUT';
  upload_url: string;
  headers: Record<string, string>;
  max_bytes: number;
  expires_at: string;
}

/** A download ticket (contract "POST storage/downloads"). */
export interface DownloadTicket {
  method: 'GET';
  download_url: string;
  headers: Record<string, string>;
  expires_at: string;
  object: ObjectRow;
}

/** A realtime event as delivered (contract "Realtime event as delivered"). */
export interface RealtimeEvent {
  id: number;
  channel: string;
  event: string;
  payload: unknown;
  ts: string;
}

/** A function secret's metadata: never its value (contract "Function secret (metadata)"). */
export interface SecretMetadata {
  project: string;
  name: string;
  version: number;
  created_at: string;
  updated_at: string;
}

/** A page of secrets, by name. */
export interface SecretsPage {
  secrets: SecretMetadata[];
  next_cursor: string | null;
}

/** A receipt (docs/api.md "Receipts"). */
export interface Receipt {
  id: string;
  project: string;
  op: string;
  target: string;
  actor: string;
  request_id: string;
  at: string;
}

/** A page of receipts, newest first. */
export interface ReceiptsPage {
  receipts: Receipt[];
  next_cursor: string | null;
}

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
