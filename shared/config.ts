/**
 * Configuration: one zod schema for every deployment mode (docs/architecture.md "Runtime matrix"; docs/deploy.md "Every setting"). Every setting is an
 * environment variable `SVCD_*`; parsing happens once, at an entry point, and a bad value fails with
 * one line naming the variable. Secrets have no default: the local stack generates them once under
 * `.svc/` and hands them to its children, so no deployment runs on a well-known secret.
 */
import { z } from 'zod';
import { parseCorsOrigins } from './http/cors.ts';

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const secret = z.string().min(32, 'must be at least 32 characters');
const url = z.string().url();
const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

/** Every setting, keyed by its environment variable, with its default. */
export const settingsSchema = z.object({
  // Public HTTP (local stack and the Node entry).
  SVCD_HOST: z.string().default('127.0.0.1'),
  SVCD_PORT: int(0, 65535).default(8787),
  // Origins whose pages may call /v0 and /v2 (docs/api.md "Browsers and CORS"): empty (none), `*`, or
  // exact origins separated by commas. The local stack sets `*`.
  SVCD_CORS_ORIGINS: z.string().default('').superRefine((value, ctx) => {
    try {
      parseCorsOrigins(value);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
    }
  }),
  // Metadata.
  SVCD_DYNAMODB_ENDPOINT: url.optional(),
  SVCD_DYNAMODB_REGION: z.string().min(1).default('us-east-1'),
  SVCD_TABLE: z.string().regex(/^[A-Za-z0-9_.-]{3,255}$/, 'must be a DynamoDB table name').default('svc'),
  SVCD_AWS_ACCESS_KEY_ID: z.string().optional(),
  SVCD_AWS_SECRET_ACCESS_KEY: z.string().optional(),
  // Accounts and sessions.
  SVCD_SESSION_SECRET: secret,
  SVCD_SESSION_TTL: int(60, 30 * 24 * 3600).default(24 * 3600),
  SVCD_INVITE_CODES: z.string().default(''),
  SVCD_KEY_PEPPER: secret,
  // Internal API (handlers -> host agent).
  SVCD_INTERNAL_SECRET: secret,
  // Limits.
  SVCD_JSON_MAX_BYTES: int(1024, 16 * 1024 * 1024).default(64 * 1024),
  SVCD_STORAGE_MAX_BYTES: int(1, 5 * 1024 ** 3).default(32 * 1024 * 1024),
  // The largest object a resumable upload stores, and how long an unfinished one lives after its last PATCH (docs/storage.md "Resumable uploads").
  SVCD_STORAGE_MAX_OBJECT_BYTES: int(0, 5 * 1024 ** 4).default(5 * 1024 ** 3),
  SVCD_RESUMABLE_EXPIRY_SECONDS: int(1, 30 * 24 * 3600).default(24 * 3600),
  SVCD_DATAPLANE_MAX_BYTES: int(1, 5 * 1024 ** 3).default(16 * 1024 * 1024),
  SVCD_LIST_LIMIT_DEFAULT: int(1, 1000).default(100),
  SVCD_TICKET_TTL_SECONDS: int(1, 7 * 24 * 3600).default(15 * 60),
  // Longest life a signed download URL may be given (docs/storage.md "Signed URLs"; S3's presigned maximum).
  SVCD_SIGNED_URL_MAX_SECONDS: int(1, 365 * 24 * 3600).default(7 * 24 * 3600),
  // How long the receipts of a deleted project stay readable (docs/lifecycle.md "Deleting a project").
  SVCD_DELETED_RECEIPTS_RETENTION_DAYS: int(1, 3650).default(30),
  // Host agent.
  SVCD_AGENT_ID: z.string().regex(/^agt_[0-9a-f]{16}$/, 'must match agt_<16 hex>').optional(),
  SVCD_ROOT: z.string().min(1).default('.svc/agent'),
  SVCD_AGENT_HOST: z.string().default('127.0.0.1'),
  SVCD_AGENT_PORT: int(0, 65535).default(8788),
  SVCD_DATAPLANE_PORT: int(0, 65535).default(8789),
  SVCD_AGENT_URL: url.optional(),
  SVCD_DATAPLANE_URL: url.optional(),
  SVCD_AGENT_CAPACITY: int(1, 100000).default(100),
  SVCD_HEARTBEAT_MS: int(100, 600000).default(5000),
  SVCD_AGENT_STALE_MS: int(500, 3600000).default(20000),
  /** Seconds without a heartbeat after which an agent may be declared lost (docs/durability.md "Agent loss"). */
  SVCD_AGENT_LOST_AFTER_S: int(1, 604800).default(600),
  /** Whether live agents declare a silent agent lost on their own once SVCD_AGENT_LOST_AFTER_S has passed (off: an operator does). */
  SVCD_AGENT_LOST_AUTO: bool.default(false),
  SVCD_ENGINE_BIN: z.string().min(1).default('bin/svc-engine'),
  SVCD_ENGINE_PORTS: z
    .string()
    .regex(/^\d{1,5}-\d{1,5}$/, 'must be a port range like 20000-20999')
    .default('20000-20999'),
  SVCD_ENGINE_START_TIMEOUT_MS: int(100, 600000).default(15000),
  SVCD_ENGINE_STOP_TIMEOUT_MS: int(100, 600000).default(10000),
  // The least `auto_sleep_after_s` a project may set (docs/lifecycle.md "Automatic sleep and
  // backups"); the local tests lower it to a second or two.
  SVCD_AUTO_SLEEP_MIN_S: int(1, 3600).default(60),
  // Engine isolation (docs/lifecycle.md "Engine isolation"). An agent running as root starts every
  // engine process as this unprivileged user and group (never 0; function runtimes use other uids);
  // each engine gets a cgroup with this memory limit and at most this much CPU (100 = one core, 0 =
  // no quota; every engine has the same CPU share). A statement running longer than the time limit
  // is interrupted by the engine (docs/engine.md "Statement time limit").
  SVCD_ENGINE_UID: int(1, 4294967294).default(65533),
  SVCD_ENGINE_GID: int(1, 4294967294).default(65533),
  SVCD_ENGINE_MEMORY_MB: int(64, 1024 * 1024).default(1024),
  SVCD_ENGINE_CPU_PERCENT: int(0, 100 * 1024).default(100),
  SVCD_ENGINE_STATEMENT_TIMEOUT_MS: int(10, 3_600_000).default(30_000),
  SVCD_LOG_MAX_BYTES: int(1024, 1024 ** 3).default(10 * 1024 * 1024),
  // Observability (docs/observability.md): the log's least severe level and its format (`auto`:
  // readable lines on a terminal, JSON otherwise), and the host agent's metrics listener.
  SVCD_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
  SVCD_LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),
  SVCD_METRICS_PORT: int(0, 65535).default(8791),
  // Object storage.
  SVCD_BLOB_BACKEND: z.enum(['fs', 's3']).default('fs'),
  // Off-machine copies of snapshots with the `fs` backend (docs/lifecycle.md "Off-machine copies"):
  // a directory that is not this machine's disk; unset: none.
  SVCD_BACKUP_DIR: z.string().min(1).optional(),
  // The largest archive POST …/import takes (docs/lifecycle.md "Export and import").
  SVCD_IMPORT_MAX_BYTES: int(1, 1024 ** 4).default(5 * 1024 ** 3),
  // fs blobs no catalog row references are swept at agent start once older than this: a younger
  // one may belong to a PUT whose catalog flip has not happened yet (docs/storage.md "Nothing lost").
  SVCD_BLOB_SWEEP_MIN_AGE_SECONDS: int(60, 30 * 24 * 3600).default(3600),
  SVCD_S3_ENDPOINT: url.optional(),
  SVCD_S3_REGION: z.string().default('us-east-1'),
  SVCD_S3_BUCKET: z.string().default('svc-blobs'),
  SVCD_S3_FORCE_PATH_STYLE: bool.default(false),
  SVCD_S3_ACCESS_KEY_ID: z.string().optional(),
  SVCD_S3_SECRET_ACCESS_KEY: z.string().optional(),
  // Function secrets: `id:base64key` pairs separated by commas; the first is active.
  SVCD_SECRETS_KEY: z.string().optional(),
  SVCD_SECRETS_KEYS: z.string().optional(),
  // Realtime.
  SVCD_REALTIME_MAX_SUBSCRIBERS_PER_PROJECT: int(1, 1_000_000).default(1000),
  SVCD_REALTIME_MAX_SUBSCRIBERS: int(1, 1_000_000).default(10000),
  SVCD_REALTIME_QUEUE: int(1, 1_000_000).default(1024),
  SVCD_REALTIME_HEARTBEAT_MS: int(0, 3_600_000).default(15_000),
  SVCD_REALTIME_COALESCE_MS: int(0, 1_000).default(20),
  // Functions (docs/functions.md "Settings").
  SVCD_FUNCTION_MAX_BYTES: int(1, 100 * 1024 * 1024).default(10 * 1024 * 1024),
  SVCD_CLOUD_ORIGIN: url.refine((v) => /^https?:$/.test(new URL(v).protocol) && new URL(v).origin === v, 'must be an http(s) origin (no path, no trailing slash)').optional(),
  SVCD_FUNCTION_WORKERD: z.string().min(1).optional(),
  SVCD_FUNCTION_SANDBOX: z.enum(['os', 'none', 'auto']).default('os'),
  SVCD_FUNCTION_MAX_RUNTIMES: int(1, 10_000).default(64),
  SVCD_FUNCTION_PROJECT_CONCURRENCY: int(1, 10_000).default(32),
  SVCD_FUNCTION_PROJECT_MEMORY_MB: int(64, 1024 * 1024).default(1024),
  SVCD_FUNCTION_CPU_PERCENT: int(0, 100 * 1024).default(100),
  SVCD_FUNCTION_EGRESS: z
    .string()
    .regex(/^(public|none|(\*\.)?[a-z0-9.-]+(,(\*\.)?[a-z0-9.-]+)*)$/i, 'must be public, none, or a comma-separated list of host names')
    .default('public'),
  SVCD_FUNCTION_EGRESS_UNSAFE_ALLOW: z
    .string()
    .regex(/^[a-z0-9.:\[\]-]+:\d{1,5}(,[a-z0-9.:\[\]-]+:\d{1,5})*$/i, 'must be a comma-separated list of host:port')
    .optional(),
  SVCD_FUNCTION_IDLE_MS: int(1000, 3_600_000).default(60_000),
  SVCD_FUNCTION_RECYCLE_MB: int(1, 1024 * 1024).optional(),
  SVCD_FUNCTION_START_TIMEOUT_MS: int(100, 600_000).default(10_000),
  SVCD_FUNCTION_LOG_MAX_BYTES: int(1024, 1024 ** 3).default(1024 * 1024),
});

/** Parsed settings. */
export type Settings = z.output<typeof settingsSchema>;

/** Thrown when a setting is missing or invalid; its message is one line naming the variable. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/**
 * Parses settings from an environment record. Unknown `SVCD_*` variables are refused too, since a
 * misspelt setting silently falling back to its default is worse than a failed start.
 */
export function loadSettings(env: Record<string, unknown>): Settings {
  const known = new Set(Object.keys(settingsSchema.shape));
  const input: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('SVCD_')) continue;
    if (!known.has(name)) throw new ConfigError(`unknown setting ${name}`);
    if (typeof value === 'string' && value !== '') input[name] = value;
  }
  const parsed = settingsSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0] ?? 'settings');
    const message = issue.code === 'invalid_type' && input[name] === undefined ? 'is required' : issue.message;
    throw new ConfigError(`invalid setting ${name}: ${message}`);
  }
  return parsed.data;
}

/** The invite codes of an invite-gated deployment (empty: signup is open). */
export function inviteCodes(settings: Settings): string[] {
  return settings.SVCD_INVITE_CODES.split(',').map((c) => c.trim()).filter(Boolean);
}

/** The engine port range `[first, last]`. */
export function enginePortRange(settings: Settings): [number, number] {
  const [a, b] = settings.SVCD_ENGINE_PORTS.split('-').map(Number) as [number, number];
  if (a < 1 || b > 65535 || a > b) throw new ConfigError(`invalid setting SVCD_ENGINE_PORTS: ${settings.SVCD_ENGINE_PORTS}`);
  return [a, b];
}
