/**
 * What every handler receives: `deps`, built once per isolate from validated settings (no module
 * reads env or opens a client at import time), and the per-request context.
 */
import type { ResumableBytes } from '../shared/blobs/multipart.ts';
import type { BlobStore } from '../shared/blobs/store.ts';
import type { IRequest, RouterType } from 'itty-router';
import type { Settings } from '../shared/config.ts';
import type { Log } from '../shared/log.ts';
import type { Db } from '../shared/db/client.ts';
import type { AgentClient } from '../shared/agent-client.ts';
import type { CursorSeal } from '../shared/cursors.ts';
import type { KeyRing } from '../shared/secrets-crypto.ts';
import type { PlacementCache } from './domain/placement-cache.ts';

/** Dependencies of the handlers. */
export interface Deps {
  settings: Settings;
  db: Db;
  agents: AgentClient;
  /** Function-secrets key ring (null: secrets are not configured on this deployment). */
  secrets: KeyRing | null;
  /** Seals and opens list cursors (shared/cursors.ts). */
  cursors: CursorSeal;
  /**
   * Hints of this isolate: where projects are placed, agent records read lately, who owns a project
   * (handlers/domain/placement-cache.ts). Never a substitute for a check.
   */
  placement: PlacementCache;
  /** The deployment's `s3` blob store (shared/blobs/s3.ts), built on first use once per isolate. */
  s3Blobs: () => BlobStore;
  /** The `s3` bytes of resumable uploads (shared/blobs/multipart-s3.ts), built on first use once per isolate. */
  s3Resumable: () => ResumableBytes;
  /** Server-side log (shared/log.ts): structured lines, never a secret. */
  log: Log;
  now: () => number;
}

/** Per-request context handed to every route as its second argument. */
export interface Ctx {
  deps: Deps;
  requestId: string;
  /**
   * What the request revealed about its caller, for its log line (docs/observability.md "Fields"):
   * the account id of a validly signed session token, set by the guards of handlers/auth.ts; the
   * error code of a refusal, set where it is rendered.
   */
  seen: { accountId?: string; errorCode?: string };
  /**
   * Runs `task` after the answer has gone out: the execution context's `waitUntil` in a worker
   * runtime (which would otherwise cancel it), merely not awaited on Node. The task handles and logs
   * its own failures.
   */
  afterAnswer(task: Promise<void>): void;
}

/** The router handlers/index.ts registers every implementation on (handlers/implement.ts): requests carry `params` and `query`. */
export type Routes = RouterType<IRequest, [Ctx]>;
