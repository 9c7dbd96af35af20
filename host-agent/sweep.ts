/**
 * Crash leftovers are swept when the agent starts, not when something happens to need the space
 * (docs/lifecycle.md "Leftovers", docs/storage.md "Nothing lost"). The local sweeps (temp files,
 * staging directories) run at once, after the supervisor repaired interrupted restores and before
 * any listener opens, so nothing of this agent is in flight. The sweeps that read DynamoDB (backups
 * without a snapshot row, fs blobs no row references) run in the background, safe beside live
 * traffic by construction: only snapshots begun before the start, only blobs older than the safe age.
 *
 * Each sweep logs one line: what it is, how many it removed, and what (paths under `SVCD_ROOT`,
 * project and snapshot ids, blob names; nothing else is in them, so never a secret). A sweep that
 * found nothing is no news: its line is `debug`, below the default level (docs/observability.md
 * "Logs"), so a clean start prints none.
 */
import { join } from 'node:path';
import { sweepBlobTempFiles } from './blobs/fs-store.ts';
import { sweepUnreferencedS3Blobs } from './blobs/s3-sweep.ts';
import { sweepUnreferencedBlobs } from './blobs/sweep.ts';
import type { Log } from '../shared/log.ts';
import type { AgentContext } from './context.ts';
import { sweepStaging, sweepTempFiles, sweepUnrecordedBackups, type Sweep } from './tenants/leftovers.ts';

/** Names listed per log line; the count is always whole. */
const LISTED = 50;

function logSweep(log: Log, what: string, sweep: Sweep): void {
  const { removed, failed } = sweep;
  let line = `agent: swept ${what}: ${removed.length} removed`;
  if (removed.length > 0) {
    line += `: ${removed.slice(0, LISTED).join(', ')}`;
    if (removed.length > LISTED) line += `, and ${removed.length - LISTED} more`;
  }
  if (failed.length > 0) line += `; ${failed.length} left (retried at the next start): ${failed.slice(0, LISTED).join(', ')}`;
  log(line, { level: removed.length > 0 || failed.length > 0 ? 'warn' : 'debug', event: 'sweep' });
}

/**
 * Runs the local sweeps now and answers the background ones' completion (never rejects). `startedAt`
 * is the agent's start: snapshots begun from then on are this agent's own.
 */
export function sweepLeftovers(ctx: AgentContext, startedAt: number): Promise<void> {
  const { layout } = ctx.tenants;
  const blobRoot = join(ctx.root, 'blobs');
  const temp = sweepTempFiles(layout);
  temp.removed.push(...sweepBlobTempFiles(blobRoot).map((name) => join('blobs', '.tmp', name)));
  logSweep(ctx.log, 'temp files', temp);
  logSweep(ctx.log, 'staging directories', sweepStaging(layout));

  const minAgeSeconds = ctx.settings.SVCD_BLOB_SWEEP_MIN_AGE_SECONDS;
  return (async () => {
    try {
      logSweep(ctx.log, 'backups without a snapshot row', await sweepUnrecordedBackups(layout, ctx.db, ctx.agentId, startedAt));
      logSweep(ctx.log, `unreferenced fs blobs older than ${minAgeSeconds} s`, await sweepUnreferencedBlobs(blobRoot, ctx.db, ctx.agentId, minAgeSeconds * 1000, ctx.now()));
      if (ctx.settings.SVCD_BLOB_BACKEND === 's3') {
        logSweep(ctx.log, `unreferenced s3 blobs older than ${minAgeSeconds} s`, await sweepUnreferencedS3Blobs(ctx.settings, ctx.db, ctx.agentId, minAgeSeconds * 1000, Date.now()));
      }
    } catch (err) {
      ctx.log(`agent: sweeping leftovers failed: ${(err as Error).message}; retried at the next start`);
    }
  })();
}

/** How often the temp files of the `fs` store are swept while the agent runs (docs/storage.md "Nothing left behind"). */
export const BLOB_TEMP_SWEEP_MS = 60_000;
/** How long a temp file no write holds is left before that sweep removes it. */
export const BLOB_TEMP_IDLE_MS = 60_000;

/**
 * Sweeps the `fs` store's temp files every `BLOB_TEMP_SWEEP_MS` while the agent runs: those no
 * write in flight holds and idle for `BLOB_TEMP_IDLE_MS` (a write that ended without removing its
 * own, whatever the reason). Answers the function that stops it.
 */
export function sweepBlobTempPeriodically(ctx: AgentContext, everyMs = BLOB_TEMP_SWEEP_MS, idleMs = BLOB_TEMP_IDLE_MS): () => void {
  const timer = setInterval(() => {
    const removed = ctx.blobs.sweepIdleTemp(idleMs, Date.now()).map((name) => join('blobs', '.tmp', name));
    if (removed.length > 0) logSweep(ctx.log, 'idle blob temp files', { removed, failed: [] });
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
