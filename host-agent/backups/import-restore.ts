/**
 * `POST …/import` on the agent (docs/lifecycle.md "Export and import"): the archive is unpacked into a
 * staging directory under the project's snapshot root (./import.ts), then in the project's turn it
 * becomes a snapshot (host-agent/tenants/adopt-backup.ts: the engine's verify, a 409 `conflict` for
 * a corrupt one) and is restored like any snapshot (the tenant asleep, 409 `tenant_running`
 * otherwise; the previous directory moved to `replaced/`). Should the restore fail, the snapshot the
 * archive became is deleted again (receipted), so a refused import leaves the project as it was.
 * The new snapshot is shipped off the machine like any other.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { Snapshot } from '../../shared/db/snapshots.ts';
import { ServiceError } from '../../shared/errors.ts';
import { randomHex } from '../../shared/ids.ts';
import type { RecordedState } from '../../shared/schemas/lifecycle.ts';
import type { AgentContext } from '../context.ts';
import { ownTree } from '../sandbox/identity.ts';
import { adoptBackup } from '../tenants/adopt-backup.ts';
import { ENGINE_DIR_MODE } from '../tenants/engine-launch.ts';
import type { Deletion } from '../tenants/replaced.ts';
import { restoreBackup } from '../tenants/restore.ts';
import { removeSnapshot } from '../tenants/snapshot-delete.ts';
import type { RestoreResult } from '../tenants/tenants.ts';
import { unpackArchive } from './import.ts';

/** What an import did: the restore, and the snapshot the archive became. */
export interface Imported {
  restored: RestoreResult;
  snapshot: Snapshot;
}

/** The label of a snapshot an archive became. */
export const IMPORT_LABEL = 'import';

/** Makes a tree the agent wrote the engine user's (docs/lifecycle.md "Engine isolation"); nothing to do when engines run as the agent's user. */
export function engineOwner(tenants: Pick<AgentContext['tenants'], 'launch'>): (dir: string) => void {
  return (dir) => {
    const user = tenants.launch.user;
    if (user) ownTree(dir, user, ENGINE_DIR_MODE);
  };
}

/** Refused at once, before a byte of the archive is read: a running tenant is never restored. */
export function refuseRunning(ctx: AgentContext, projectId: string): void {
  if (ctx.tenants.liveEndpoint(projectId)) throw new ServiceError('tenant_running', 'the tenant is running: sleep it before importing into it');
}

/** Imports the archive `body` into the sleeping tenant of `projectId`. */
export async function importArchive(ctx: AgentContext, projectId: string, recorded: RecordedState, body: Readable, who: Deletion): Promise<Imported> {
  const layout = ctx.tenants.layout;
  mkdirSync(layout.snapshotRoot(projectId), { recursive: true });
  // A name the start's sweep of staging directories removes ("Leftovers"), should the agent die now.
  const staging = join(layout.snapshotRoot(projectId), `import.staging-${randomHex(8)}`);
  try {
    await unpackArchive(body, staging, ctx.settings.SVCD_IMPORT_MAX_BYTES);
    const imported = await ctx.tenants.exclusive(projectId, async (parts) => {
      refuseRunning(ctx, projectId);
      const snapshot = await adoptBackup({ ...parts, giveToEngine: engineOwner(ctx.tenants) }, projectId, staging, IMPORT_LABEL);
      parts.states.notify(projectId, 'snapshot.created', { snapshot_id: snapshot.id, label: snapshot.label, created_at: snapshot.created_at });
      try {
        const restored = await restoreBackup(parts, projectId, { snapshotId: snapshot.id, backupDir: snapshot.backup_dir, backup: snapshot.backup });
        const { answer } = await parts.states.record(projectId, recorded, 'sleeping');
        parts.states.notify(projectId, 'project.restored', { snapshot_id: snapshot.id, restored_at: restored.restoredAt });
        return { restored: { state: answer.state, ...restored }, snapshot };
      } catch (err) {
        await removeSnapshot(parts, projectId, snapshot.id, who).catch((e: Error) => ctx.log(`agent: removing the snapshot ${snapshot.id} of a refused import failed: ${e.message}`));
        throw err;
      }
    });
    return { ...imported, snapshot: await ctx.backups.afterSnapshot(imported.snapshot) };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}
