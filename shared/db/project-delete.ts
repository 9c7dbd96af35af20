/**
 * Repository: the deletion of a project (docs/lifecycle.md "Deleting a project").
 *
 * A deletion is one item, the project's *deletion record* `PRJ#<prj>` / `GONE`, written by the
 * transaction that removes the project item, writes the `project.delete` receipt and uncounts the
 * project on its agent and its owner's account. That transaction is the commit point: from then on
 * every read of the project finds no project item and answers 404, whatever is left to remove.
 *
 * While the rest is removed the record is `deleting` and indexed under `DELETING#<agent>` (gsi1), so
 * the agent's start finds the deletions a crash interrupted. Everything else in the project's
 * partition (buckets, catalog rows, keys with their lookup items, snapshots, secrets, and whatever
 * an area adds there later) is removed generically, in transactions conditioned on the record still
 * being `deleting`; receipts stay, and get the table's time-to-live. Once done, the record turns
 * `deleted`, leaves the index, and stays beside the receipts until `expires_at`
 * (`SVCD_DELETED_RECEIPTS_RETENTION_DAYS` after the deletion), when DynamoDB's time-to-live drops both.
 */
import { GetCommand, TransactWriteCommand, UpdateCommand, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { errors } from '../errors.ts';
import { projectCountChange } from './accounts.ts';
import type { Db } from './client.ts';
import { cancellationReasons, isConditionFailure } from './client.ts';
import { queryEach } from './pagination.ts';
import type { ProjectRecord } from './projects.ts';
import type { ProjectState } from '../schemas/projects.ts';
import { receiptPut, type Receipt } from './receipts.ts';
import { GSI1, TTL_ATTRIBUTE, keys, prefixes } from './table.ts';

/** The deletion record of a project. */
export interface ProjectDeletion {
  id: string;
  name: string;
  owner: string;
  agent_id: string;
  created_at: string;
  /** `deleting` until everything but the receipts is removed, then `deleted`. */
  state: 'deleting' | 'deleted';
  deleted_at: string;
  /** Until when the receipts stay readable to the owner. */
  expires_at: string;
  finished_at: string | null;
  /**
   * The state the deletion answered (its engine stopped), so a handler whose call lost the agent's
   * answer can give the same one (absent on records written before it was kept).
   */
  project_state?: ProjectState;
}

type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** Actions per purge transaction, below DynamoDB's 100 with room for the guard and a key's pair. */
const PURGE_BATCH = 96;

function toDeletion(item: Record<string, any>): ProjectDeletion {
  return {
    id: item.id,
    name: item.name,
    owner: item.owner,
    agent_id: item.agent_id,
    created_at: item.created_at,
    state: item.state,
    deleted_at: item.deleted_at,
    expires_at: item.expires_at,
    finished_at: item.finished_at ?? null,
    ...(item.project_state ? { project_state: item.project_state } : {}),
  };
}

/** Unix seconds of an RFC 3339 time, as the table's time-to-live attribute holds them. */
function epochSeconds(iso: string): number {
  return Math.ceil(Date.parse(iso) / 1000);
}

/**
 * The commit point of a deletion: removes the project item (if `project` is still what is recorded
 * and hosted by its agent), writes the deletion record `deleting` and `receipt`, and uncounts the
 * project on its agent and its owner, in one transaction. A project no longer there is 404.
 */
export async function markProjectDeleting(
  db: Db,
  input: { project: ProjectRecord; at: string; expiresAt: string; receipt: Receipt; state?: ProjectState },
): Promise<ProjectDeletion> {
  const { project, at, expiresAt, receipt, state } = input;
  const deletion: ProjectDeletion = {
    id: project.id,
    name: project.name,
    owner: project.owner,
    agent_id: project.agent_id,
    created_at: project.created_at,
    state: 'deleting',
    deleted_at: at,
    expires_at: expiresAt,
    finished_at: null,
    ...(state ? { project_state: state } : {}),
  };
  const { finished_at: _unfinished, ...stored } = deletion;
  try {
    await db.doc.send(
      new TransactWriteCommand({
        TransactItems: [
          {
            Delete: {
              TableName: db.table,
              Key: keys.project(project.id),
              ConditionExpression: 'attribute_exists(pk) AND agent_id = :agent AND #owner = :owner',
              ExpressionAttributeNames: { '#owner': 'owner' },
              ExpressionAttributeValues: { ':agent': project.agent_id, ':owner': project.owner },
            },
          },
          {
            Put: {
              TableName: db.table,
              Item: {
                ...keys.projectDeletion(project.id),
                type: 'project-deletion',
                ...stored,
                [GSI1.pk]: keys.deletingOn(project.agent_id),
                [GSI1.sk]: project.id,
              },
              ConditionExpression: 'attribute_not_exists(pk)',
            },
          },
          receiptPut(db, receipt),
          {
            Update: {
              TableName: db.table,
              Key: keys.agent(project.agent_id),
              UpdateExpression: 'ADD tenants :minus',
              ConditionExpression: 'attribute_exists(pk)',
              ExpressionAttributeValues: { ':minus': -1 },
            },
          },
          projectCountChange(db, project.owner, -1),
        ],
      }),
    );
  } catch (err) {
    if (isConditionFailure(err)) {
      const [projectItem, record] = cancellationReasons(err);
      if (projectItem === 'ConditionalCheckFailed' || record === 'ConditionalCheckFailed') throw errors.notFound(`project ${project.id} not found`);
      throw errors.conflict(`project ${project.id} is being changed concurrently, retry`);
    }
    throw err;
  }
  return deletion;
}

/** The deletion record of a project, or null (read consistently). */
export async function getProjectDeletion(db: Db, projectId: string): Promise<ProjectDeletion | null> {
  const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: keys.projectDeletion(projectId), ConsistentRead: true }));
  return out.Item ? toDeletion(out.Item) : null;
}

/** The deletions `agentId` has still to finish (the index is eventually consistent: for the agent's start). */
export async function deletionsOf(db: Db, agentId: string): Promise<ProjectDeletion[]> {
  const found: ProjectDeletion[] = [];
  const query = {
    TableName: db.table,
    IndexName: GSI1.name,
    KeyConditionExpression: '#p = :p',
    ExpressionAttributeNames: { '#p': GSI1.pk },
    ExpressionAttributeValues: { ':p': keys.deletingOn(agentId) },
  };
  await queryEach(db, query, (items) => {
    for (const item of items) if (item.state === 'deleting') found.push(toDeletion(item));
  });
  return found;
}

/** The ids of the project's keys (listing items), for the caches that must forget them. */
export async function projectKeyIds(db: Db, projectId: string): Promise<string[]> {
  const ids: string[] = [];
  const query = {
    TableName: db.table,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
    ExpressionAttributeValues: { ':pk': keys.project(projectId).pk, ':prefix': prefixes.key },
    ProjectionExpression: 'key_id',
    ConsistentRead: true,
  };
  await queryEach(db, query, (items) => {
    for (const item of items) if (typeof item.key_id === 'string') ids.push(item.key_id);
  });
  return ids;
}

/**
 * Whether any item of the project's partition names the `s3` backend (a catalog row, a function's
 * module): a deployment may have changed backend since its bytes were written.
 */
export async function usesS3(db: Db, projectId: string): Promise<boolean> {
  let found = false;
  const query = {
    TableName: db.table,
    KeyConditionExpression: 'pk = :pk',
    FilterExpression: 'backend = :s3',
    ExpressionAttributeValues: { ':pk': keys.project(projectId).pk, ':s3': 's3' },
    ProjectionExpression: 'pk',
    ConsistentRead: true,
  };
  await queryEach(db, query, (items) => (found = items.length > 0));
  return found;
}

/**
 * Removes every item of a `deleting` project's partition but its receipts and its deletion record,
 * with each key's lookup item, and gives every receipt the record's expiry as time-to-live. Runs in
 * transactions of at most 100 items, each conditioned on the record still being `deleting`;
 * idempotent, so a crash anywhere leaves a partition the next run finishes. Passes over the
 * partition until one finds nothing to do (a write that raced the commit point is caught by the
 * next pass). Answers how many items it removed.
 */
export async function purgeProjectItems(db: Db, deletion: ProjectDeletion): Promise<number> {
  const pk = keys.project(deletion.id).pk;
  const guard: TransactItem = {
    ConditionCheck: {
      TableName: db.table,
      Key: keys.projectDeletion(deletion.id),
      ConditionExpression: '#state = :deleting',
      ExpressionAttributeNames: { '#state': 'state' },
      ExpressionAttributeValues: { ':deleting': 'deleting' },
    },
  };
  const ttl = epochSeconds(deletion.expires_at);
  let removed = 0;
  const flush = async (actions: TransactItem[]) => {
    if (actions.length === 0) return;
    try {
      await db.doc.send(new TransactWriteCommand({ TransactItems: [guard, ...actions] }));
    } catch (err) {
      if (isConditionFailure(err) && cancellationReasons(err)[0] === 'ConditionalCheckFailed') {
        throw errors.conflict(`the deletion of project ${deletion.id} is no longer in progress`);
      }
      throw err;
    }
  };
  const query = {
    TableName: db.table,
    KeyConditionExpression: 'pk = :pk',
    ExpressionAttributeValues: { ':pk': pk },
    ProjectionExpression: 'pk, sk, key_id, #ttl',
    ExpressionAttributeNames: { '#ttl': TTL_ATTRIBUTE },
    ConsistentRead: true,
  };
  for (let pass = 0; pass < 10; pass++) {
    let actions: TransactItem[] = [];
    let found = 0;
    await queryEach(db, query, async (items) => {
      for (const item of items) {
        const sk = String(item.sk);
        if (sk === keys.projectDeletion(deletion.id).sk) continue;
        if (sk.startsWith(prefixes.receipt)) {
          if (item[TTL_ATTRIBUTE] !== undefined) continue;
          actions.push({
            Update: {
              TableName: db.table,
              Key: { pk, sk },
              UpdateExpression: 'SET #ttl = :ttl',
              ConditionExpression: 'attribute_exists(pk)',
              ExpressionAttributeNames: { '#ttl': TTL_ATTRIBUTE },
              ExpressionAttributeValues: { ':ttl': ttl },
            },
          });
        } else {
          actions.push({ Delete: { TableName: db.table, Key: { pk, sk } } });
          removed++;
          // A key's lookup item (outside the partition) goes with its listing item.
          if (sk.startsWith(prefixes.key) && typeof item.key_id === 'string') actions.push({ Delete: { TableName: db.table, Key: keys.keyLookup(item.key_id) } });
        }
        found++;
        if (actions.length >= PURGE_BATCH) {
          await flush(actions);
          actions = [];
        }
      }
    });
    await flush(actions);
    if (found === 0) return removed;
  }
  throw new Error(`project ${deletion.id}: items keep appearing in its partition while it is deleted`);
}

/**
 * Closes a deletion once everything but the receipts is gone: `deleted`, out of the agent's index,
 * and dropped by DynamoDB's time-to-live at `expires_at` (as the receipts are). Idempotent.
 */
export async function markProjectDeleted(db: Db, deletion: ProjectDeletion, at: string): Promise<void> {
  try {
    await db.doc.send(
      new UpdateCommand({
        TableName: db.table,
        Key: keys.projectDeletion(deletion.id),
        UpdateExpression: 'SET #state = :deleted, finished_at = :at, #ttl = :ttl REMOVE #gpk, #gsk',
        ConditionExpression: '#state = :deleting',
        ExpressionAttributeNames: { '#state': 'state', '#ttl': TTL_ATTRIBUTE, '#gpk': GSI1.pk, '#gsk': GSI1.sk },
        ExpressionAttributeValues: { ':deleted': 'deleted', ':deleting': 'deleting', ':at': at, ':ttl': epochSeconds(deletion.expires_at) },
      }),
    );
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}
