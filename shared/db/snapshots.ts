/**
 * Repository: snapshots (contract "Snapshot"). A snapshot lives in its project's partition under
 * `SNAP#<snapshot_id>`. Snapshot ids are time-ordered (below), so one GetItem answers "this
 * snapshot" and one backwards Query answers "newest first" without a second index.
 */
import { GetCommand, PutCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { errors } from '../errors.ts';
import { randomHex } from '../ids.ts';
import type { Db } from './client.ts';
import { cancellationReasons, isConditionFailure } from './client.ts';
import type { Page } from './pagination.ts';
import { receiptPut, type Receipt } from './receipts.ts';
import { listProjectItems } from './pagination.ts';
import { keys, prefixes } from './table.ts';

/** The engine's status snapshot, as copied into a snapshot (contract "Snapshot" `lineage`). */
export interface SnapshotLineage {
  catalog_version: number;
  directory_lineage: string;
  logical_time_micros: number;
  root_digest: string;
  visible_csn: number;
}

/** The engine's backup output, as copied into a snapshot (contract "Snapshot" `backup`). */
export interface SnapshotBackup {
  backup_path: string;
  checkpoint_digest: string;
  file_count: number;
  total_bytes: number;
  status: 'created' | 'verified';
  visible_csn: number;
}

/**
 * Whether the snapshot's backup directory has a complete off-machine copy (docs/lifecycle.md
 * "Off-machine copies"): `pending` until the copy is checked and marked complete, `unavailable` on an
 * agent without a store; `completed_at` when it completed.
 */
export interface Offsite {
  state: 'pending' | 'complete' | 'unavailable';
  completed_at: string | null;
}

/** A snapshot as the contract's Snapshot table describes it, with its off-machine state. */
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
  offsite: Offsite;
  /** Taken by the agent after a sleep (docs/lifecycle.md "Automatic sleep and backups"), and pruned past the project's `backup.keep`. */
  automatic: boolean;
}

/**
 * A fresh snapshot id `snap_` + 16 hex: 12 hex of the creation time in milliseconds, then 4 random
 * hex. The contract fixes only the pattern; time order makes the sort key sort by creation. Ids
 * need be unique only within a project, where the agent serialises snapshot creation, and the
 * conditional put refuses the (vanishing) collision anyway.
 */
export function newSnapshotId(now: number): string {
  return `snap_${Math.max(0, Math.floor(now)).toString(16).padStart(12, '0').slice(-12)}${randomHex(2)}`;
}

function toSnapshot(item: Record<string, any>): Snapshot {
  return {
    id: item.id,
    project: item.project,
    label: item.label ?? null,
    created_at: item.created_at,
    engine_version: item.engine_version,
    source_data_dir: item.source_data_dir,
    backup_dir: item.backup_dir,
    lineage: item.lineage,
    backup: item.backup,
    // A row written before off-machine copies existed has never been copied.
    offsite: item.offsite ?? { state: 'pending', completed_at: null },
    automatic: item.automatic === true,
  };
}

/** Stores a new snapshot; refuses to overwrite one. */
export async function putSnapshot(db: Db, snapshot: Snapshot): Promise<void> {
  try {
    await db.doc.send(
      new PutCommand({
        TableName: db.table,
        Item: { ...keys.snapshot(snapshot.project, snapshot.id), type: 'snapshot', ...snapshot },
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
  } catch (err) {
    if (isConditionFailure(err)) throw errors.conflict('snapshot id collision, retry');
    throw err;
  }
}

/** Reads one snapshot of a project, or null. */
export async function getSnapshot(db: Db, projectId: string, snapshotId: string): Promise<Snapshot | null> {
  const out = await db.doc.send(
    new GetCommand({ TableName: db.table, Key: keys.snapshot(projectId, snapshotId), ConsistentRead: true }),
  );
  return out.Item ? toSnapshot(out.Item) : null;
}

/** Lists a project's snapshots, newest first. */
export async function listSnapshots(db: Db, projectId: string, limit: number, cursor?: string): Promise<Page<Snapshot>> {
  const page = await listProjectItems(db, projectId, prefixes.snapshot, { limit, cursor }, { newestFirst: true, consistent: true });
  return { items: page.items.map(toSnapshot), nextCursor: page.nextCursor };
}

/**
 * Removes a snapshot's row and writes its `snapshot.delete` receipt in one transaction; answers the
 * record removed. Absent (never there, or removed meanwhile): 404. The backup directory is the
 * caller's to remove afterwards: without a row it is never restored, and one a crash leaves is swept
 * at the agent's next start (docs/lifecycle.md "Deleting a snapshot").
 */
export async function deleteSnapshotRow(db: Db, projectId: string, snapshotId: string, receipt: Receipt): Promise<Snapshot> {
  const current = await getSnapshot(db, projectId, snapshotId);
  if (!current) throw errors.notFound(`snapshot ${snapshotId} not found`);
  try {
    await db.doc.send(
      new TransactWriteCommand({
        TransactItems: [
          { Delete: { TableName: db.table, Key: keys.snapshot(projectId, snapshotId), ConditionExpression: 'attribute_exists(pk)' } },
          receiptPut(db, receipt),
        ],
      }),
    );
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    // The row's condition failed: it went meanwhile. Otherwise the receipt's (an id collision).
    if (cancellationReasons(err)[0] === 'ConditionalCheckFailed') throw errors.notFound(`snapshot ${snapshotId} not found`);
    throw errors.conflict(`snapshot ${snapshotId} is being changed concurrently, retry`);
  }
  return current;
}

/** The id of the project's newest snapshot, or null. */
export async function latestSnapshotId(db: Db, projectId: string): Promise<string | null> {
  const page = await listSnapshots(db, projectId, 1);
  return page.items[0]?.id ?? null;
}

/**
 * Records the snapshot's off-machine state; false when its row is gone (deleted meanwhile). A
 * complete state is never taken back by a later write of another.
 */
export async function setSnapshotOffsite(db: Db, projectId: string, snapshotId: string, offsite: Offsite): Promise<boolean> {
  try {
    await db.doc.send(
      new UpdateCommand({
        TableName: db.table,
        Key: keys.snapshot(projectId, snapshotId),
        UpdateExpression: 'SET offsite = :o',
        ConditionExpression: offsite.state === 'complete' ? 'attribute_exists(pk)' : 'attribute_exists(pk) AND (attribute_not_exists(offsite) OR offsite.#s <> :complete)',
        ...(offsite.state === 'complete' ? {} : { ExpressionAttributeNames: { '#s': 'state' } }),
        ExpressionAttributeValues: { ':o': offsite, ...(offsite.state === 'complete' ? {} : { ':complete': 'complete' }) },
      }),
    );
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** The project item's backup fields (docs/lifecycle.md "Off-machine copies"), as the agent keeps them. */
export interface ProjectBackupFields {
  /** created_at of the newest snapshot whose off-machine copy completed, and its id; null: none. */
  last_backup_at: string | null;
  last_backup_snapshot_id: string | null;
  /** The off-machine state of the project's newest snapshot; null: it has none. */
  last_snapshot_offsite: Offsite['state'] | null;
}

/**
 * The project's backup fields as its snapshot rows say (newest first, reading pages until a
 * complete copy is found, at most `maxRows`).
 */
export async function backupFieldsOf(db: Db, projectId: string, maxRows = 5000): Promise<ProjectBackupFields> {
  let cursor: string | undefined;
  let newest: Offsite['state'] | null | undefined;
  let read = 0;
  do {
    const page = await listSnapshots(db, projectId, 100, cursor);
    for (const snap of page.items) {
      newest ??= snap.offsite.state;
      if (snap.offsite.state === 'complete') return { last_backup_at: snap.created_at, last_backup_snapshot_id: snap.id, last_snapshot_offsite: newest };
    }
    read += page.items.length;
    cursor = page.nextCursor ?? undefined;
  } while (cursor && read < maxRows);
  return { last_backup_at: null, last_backup_snapshot_id: null, last_snapshot_offsite: newest ?? null };
}

/**
 * Writes the project's backup fields, on condition that the recovery point it read is still the one
 * recorded (`read`: what it was when `fields` were computed), so a concurrent newer copy is never
 * taken back. False when the condition failed or the project is gone.
 */
export async function writeBackupFields(db: Db, projectId: string, fields: ProjectBackupFields, read: string | null): Promise<boolean> {
  const set = Object.entries(fields).filter(([, v]) => v !== null);
  const remove = Object.entries(fields).filter(([, v]) => v === null).map(([k]) => k);
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  const sets = set.map(([k, v], i) => {
    names[`#f${i}`] = k;
    values[`:v${i}`] = v;
    return `#f${i} = :v${i}`;
  });
  const expression = [sets.length ? `SET ${sets.join(', ')}` : '', remove.length ? `REMOVE ${remove.join(', ')}` : ''].filter(Boolean).join(' ');
  names['#lb'] = 'last_backup_snapshot_id';
  if (read !== null) values[':read'] = read;
  try {
    await db.doc.send(
      new UpdateCommand({
        TableName: db.table,
        Key: keys.project(projectId),
        UpdateExpression: expression,
        ConditionExpression: `attribute_exists(pk) AND ${read === null ? 'attribute_not_exists(#lb)' : '#lb = :read'}`,
        ExpressionAttributeNames: names,
        ...(Object.keys(values).length ? { ExpressionAttributeValues: values } : {}),
      }),
    );
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** The recovery point recorded on the project item (its `last_backup_snapshot_id`), or null. */
export async function recordedBackupOf(db: Db, projectId: string): Promise<string | null | undefined> {
  const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: keys.project(projectId), ConsistentRead: true, ProjectionExpression: 'pk, last_backup_snapshot_id' }));
  if (!out.Item) return undefined;
  return (out.Item.last_backup_snapshot_id as string | undefined) ?? null;
}
