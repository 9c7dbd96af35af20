/**
 * What the SDK sends and receives, typed from the route declarations (shared/api/) and so from the
 * zod schemas the service validates its inputs with and describes its answers with (shared/schemas/;
 * docs/sdk.md "How the SDK is made"): each input is the `z.input` of the route's body schema, each
 * answer the `z.output` of the route's answer schema, so the SDK's types and the service's answers
 * cannot drift apart. Type imports only: nothing of zod reaches the bundle.
 */
import type * as api from '../shared/api/index.ts';
import type { AnswerOf, AnswersOf, BodyInputOf } from '../shared/api/index.ts';

// Inputs

/** Body of project creation. */
export type CreateProjectInput = BodyInputOf<typeof api.projects.create>;
/** Body of a project's rename. */
export type RenameProjectInput = BodyInputOf<typeof api.projects.rename>;
/** Body of signup. */
export type SignupInput = BodyInputOf<typeof api.accounts.signup>;
/** Body of a new session. */
export type SessionInput = BodyInputOf<typeof api.accounts.openSession>;
/** Body of key creation. */
export type CreateKeyInput = BodyInputOf<typeof api.keys.issue>;
/** Body of snapshot creation. */
export type CreateSnapshotInput = BodyInputOf<typeof api.lifecycle.createSnapshot>;
/** Body of an upload ticket request. */
export type UploadTicketInput = BodyInputOf<typeof api.storage.uploadTicket>;
/** Body of a download ticket request (`signed: true` adds a URL usable without the session). */
export type DownloadTicketInput = BodyInputOf<typeof api.storage.downloadTicket>;
/** Body of a realtime publish. */
export type PublishInput = BodyInputOf<typeof api.realtime.publish>;

/** Every list answers one page and the cursor of the next (docs/api.md "Decisions"). */
export interface PageInput {
  /** 1 to 1000, default 100. */
  limit?: number;
  /** The `next_cursor` of a previous page. */
  cursor?: string;
}

// Answers

/** Signup's answer: the account secret is shown here only. */
export type SignedUp = AnswerOf<typeof api.accounts.signup, 201>;
/** A session. */
export type Session = AnswerOf<typeof api.accounts.openSession, 201>;
/** The account of the session (`GET /v0/me`). */
export type Me = AnswerOf<typeof api.accounts.me, 200>;
/** A rotated account secret, shown once, with a session that stands after the rotation. */
export type RotatedSecret = AnswerOf<typeof api.accounts.rotateSecret, 200>;
/** `GET /v0/health`: `ok`, or `degraded` with the error envelope when no host agent can run tenants. */
export type Health = AnswersOf<typeof api.service.health>;

/** A project (contract "Project"). */
export type Project = AnswerOf<typeof api.projects.read, 200>;
/** A project's state. */
export type ProjectState = Project['state'];
/** A page of projects. */
export type ProjectsPage = AnswerOf<typeof api.projects.list, 200>;
/** What head answers: a live probe or the offline status (contract "GET /v0/projects/{id}/head"). */
export type Head = AnswerOf<typeof api.lifecycle.head, 200>;
/** The engine's recent log lines. */
export type EngineLogs = AnswerOf<typeof api.logs.engineLogs, 200>;

/** A snapshot (contract "Snapshot"). */
export type Snapshot = AnswerOf<typeof api.lifecycle.readSnapshot, 200>;
/** The engine's status snapshot in a snapshot. */
export type SnapshotLineage = Snapshot['lineage'];
/** The engine's backup output in a snapshot. */
export type SnapshotBackup = Snapshot['backup'];
/** A page of snapshots, newest first. */
export type SnapshotsPage = AnswerOf<typeof api.lifecycle.listSnapshots, 200>;
/** Restore's answer. */
export type Restored = AnswerOf<typeof api.lifecycle.restore, 200>;
/** The answer of an import: the restore, and the snapshot the archive became. */
export type Imported = AnswerOf<typeof api.lifecycle.importArchive, 200>;
/** A previous data directory restore moved aside. */
export type ReplacedDir = AnswerOf<typeof api.lifecycle.discardReplaced, 200>;
/** A page of previous data directories, newest first. */
export type ReplacedPage = AnswerOf<typeof api.lifecycle.listReplaced, 200>;

/** A key as issued: `key` is the secret, shown once. */
export type IssuedKey = AnswerOf<typeof api.keys.issue, 201>;
/** A key as listed or revoked: never the secret. */
export type KeyRecord = AnswerOf<typeof api.keys.revoke, 200>;
/** A page of keys. */
export type KeysPage = AnswerOf<typeof api.keys.list, 200>;

/** A bucket (contract "Bucket record"). */
export type Bucket = AnswersOf<typeof api.storage.putBucket>;
/** A page of buckets. */
export type BucketsPage = AnswerOf<typeof api.storage.listBuckets, 200>;
/** An object's catalog row (contract "Object catalog row"). */
export type ObjectRow = AnswerOf<typeof api.storage.deleteObject, 200>;
/** A page of a bucket's objects, sorted by key, with the common prefixes of a delimited listing. */
export type ObjectsPage = AnswerOf<typeof api.storage.listObjects, 200>;
/** An upload ticket. */
export type UploadTicket = AnswerOf<typeof api.storage.uploadTicket, 201>;
/** A download ticket. */
export type DownloadTicket = AnswerOf<typeof api.storage.downloadTicket, 200>;

/** A realtime event as delivered (contract "Realtime event as delivered"). */
export type RealtimeEvent = AnswerOf<typeof api.realtime.publish, 200>;
/** A single-use subscription ticket for a browser's EventSource. */
export type RealtimeTicket = AnswerOf<typeof api.realtime.ticket, 201>;

/** A function secret's metadata: never its value. */
export type SecretMetadata = AnswerOf<typeof api.secrets.read, 200>;
/** A page of secrets, by name. */
export type SecretsPage = AnswerOf<typeof api.secrets.list, 200>;

/** A page of receipts, newest first. */
export type ReceiptsPage = AnswerOf<typeof api.receipts.ofProject, 200>;
/** A receipt. */
export type Receipt = ReceiptsPage['receipts'][number];

/** A function: its current version and that version's settings. */
export type FunctionInfo = AnswerOf<typeof api.functions.read, 200>;
/** A page of functions. */
export type FunctionsPage = AnswerOf<typeof api.functions.list, 200>;
/** A page of a function's versions, newest first. */
export type FunctionVersionsPage = AnswerOf<typeof api.functions.versions, 200>;
/** One deployed version of a function. */
export type FunctionVersion = FunctionVersionsPage['versions'][number];
/** A function's last console lines, secrets redacted. */
export type FunctionLogs = AnswerOf<typeof api.functions.logs, 200>;

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
