/** Builds the handlers' `deps` from an environment record, once per isolate or process. */
import type { ResumableBytes } from '../shared/blobs/multipart.ts';
import { s3ResumableBytes } from '../shared/blobs/multipart-s3.ts';
import { createAgentClient } from '../shared/agent-client.ts';
import { s3BlobStore } from '../shared/blobs/s3.ts';
import type { BlobStore } from '../shared/blobs/store.ts';
import { cursorSeal } from '../shared/cursors.ts';
import { loadSettings } from '../shared/config.ts';
import { consoleLog, type Log } from '../shared/log.ts';
import { createDb, type DbOptions } from '../shared/db/client.ts';
import { parseKeyRing } from '../shared/secrets-crypto.ts';
import type { Deps } from './context.ts';
import { PlacementCache } from './domain/placement-cache.ts';

/**
 * Validates settings and opens the clients. Throws ConfigError naming a bad setting. `db` lets a
 * Node entry hand DynamoDB a lighter transport than fetch (shared/db/transport-node.ts).
 */
export function buildDeps(env: Record<string, unknown>, log?: Log, db: DbOptions = {}): Deps {
  const settings = loadSettings(env);
  const now = () => Date.now();
  let s3: BlobStore | undefined;
  let s3Uploads: ResumableBytes | undefined;
  return {
    settings,
    db: createDb(settings, db),
    agents: createAgentClient(settings.SVCD_INTERNAL_SECRET),
    // Parsed here so a bad key ring fails the start, not the first secret PUT.
    secrets: parseKeyRing(settings),
    cursors: cursorSeal(settings.SVCD_SESSION_SECRET),
    placement: new PlacementCache({ now }),
    // Built on first use: a deployment on the fs backend never opens an S3 client.
    s3Blobs: () => (s3 ??= s3BlobStore(settings)),
    s3Resumable: () => (s3Uploads ??= s3ResumableBytes(settings)),
    // JSON lines through console unless the entry brings its own (pino on Node: handlers/node-server.ts).
    log: log ?? consoleLog('handlers', settings.SVCD_LOG_LEVEL),
    now,
  };
}
