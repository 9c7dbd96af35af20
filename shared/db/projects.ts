/** Repository: projects, their owner and their placement on a host agent. */
import { GetCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { errors } from '../errors.ts';
import { projectCountChange } from './accounts.ts';
import type { BackupPolicy, Project, ProjectState } from '../schemas/projects.ts';
import { DATA_PLANE, ENGINE_PIN } from '../schemas/projects.ts';
import type { Db } from './client.ts';
import type { RestoredFrom } from './moves.ts';
import { cancellationReasons, isConditionFailure } from './client.ts';
import type { Page } from './pagination.ts';
import { queryPage, tableKeyOf } from './pagination.ts';
import { GSI1, keys, prefixes } from './table.ts';

/** A project as stored: the public fields plus its owner and the agent that hosts its tenant. */
export interface ProjectRecord {
  id: string;
  name: string;
  state: ProjectState;
  created_at: string;
  updated_at: string;
  owner: string;
  agent_id: string;
  /**
   * Set by the hosting agent when it recorded this state as the truth it keeps (docs/lifecycle.md
   * "Reconciliation"): GET answers such a record without asking the agent. Absent when anything
   * else wrote the state, or the agent wrote one it has not yet seen hold (a wakeup's early
   * `running`).
   */
  state_kept?: boolean;
  /** The recovery point: created_at of the newest snapshot with a complete off-machine copy (docs/lifecycle.md "Off-machine copies"). */
  last_backup_at?: string;
  /** The off-machine state of the newest snapshot's copy; absent: no snapshot. */
  last_snapshot_offsite?: 'pending' | 'complete' | 'unavailable';
  /** Idle seconds after which the agent sleeps the tenant; absent or null: never (docs/lifecycle.md "Automatic sleep and backups"). */
  auto_sleep_after_s?: number | null;
  /** Automatic snapshots at sleep; absent or null: none. */
  backup?: BackupPolicy;
  /** Where the project came back from after its agent was lost (shared/db/moves.ts; docs/durability.md). */
  restored_from?: RestoredFrom;
}

/** What `PATCH /v0/projects/{id}` may change; a field left undefined is left as it is, null clears it. */
export interface ProjectChanges {
  name?: string;
  auto_sleep_after_s?: number | null;
  backup?: BackupPolicy;
}

/** The public view of a project (contract "Project"). */
export function projectView(p: ProjectRecord): Project {
  return {
    id: p.id,
    name: p.name,
    state: p.state,
    created_at: p.created_at,
    updated_at: p.updated_at,
    native: { pin: ENGINE_PIN, data_plane: DATA_PLANE },
    last_backup_at: p.last_backup_at ?? null,
    last_backup_offsite: p.last_snapshot_offsite ?? null,
    auto_sleep_after_s: p.auto_sleep_after_s ?? null,
    backup: p.backup ?? null,
    agent_id: p.agent_id,
    restored_from: p.restored_from ?? null,
  };
}

/** A project item as its record (exported for reads batched with other items, e.g. storage). */
export function toRecord(item: Record<string, any>): ProjectRecord {
  return {
    id: item.id,
    name: item.name,
    state: item.state,
    created_at: item.created_at,
    updated_at: item.updated_at,
    owner: item.owner,
    agent_id: item.agent_id,
    ...(item.state_kept === true ? { state_kept: true } : {}),
    ...(typeof item.last_backup_at === 'string' ? { last_backup_at: item.last_backup_at } : {}),
    ...(typeof item.last_snapshot_offsite === 'string' ? { last_snapshot_offsite: item.last_snapshot_offsite as NonNullable<ProjectRecord['last_snapshot_offsite']> } : {}),
    ...(typeof item.auto_sleep_after_s === 'number' ? { auto_sleep_after_s: item.auto_sleep_after_s } : {}),
    ...(item.backup ? { backup: { on_sleep: item.backup.on_sleep === true, keep: Number(item.backup.keep) } } : {}),
    ...(item.restored_from ? { restored_from: item.restored_from as RestoredFrom } : {}),
  };
}

/**
 * Creates a project and counts it on its agent and its owner's account, in one transaction: the
 * project is written only if the agent is still registered, so a placement can never point at nothing.
 */
export async function createProject(db: Db, project: ProjectRecord): Promise<void> {
  try {
    await db.doc.send(
      new TransactWriteCommand({
        TransactItems: [
          {
            Put: {
              TableName: db.table,
              Item: {
                ...keys.project(project.id),
                type: 'project',
                ...project,
                [GSI1.pk]: keys.projectsOf(project.owner),
                [GSI1.sk]: `${prefixes.project}${project.created_at}#${project.id}`,
              },
              ConditionExpression: 'attribute_not_exists(pk)',
            },
          },
          {
            Update: {
              TableName: db.table,
              Key: keys.agent(project.agent_id),
              UpdateExpression: 'ADD tenants :one',
              ConditionExpression: 'attribute_exists(pk)',
              ExpressionAttributeValues: { ':one': 1 },
            },
          },
          projectCountChange(db, project.owner, 1),
        ],
      }),
    );
  } catch (err) {
    if (isConditionFailure(err)) {
      const [project_, agent] = cancellationReasons(err);
      if (agent === 'ConditionalCheckFailed') throw errors.orchestrator('the chosen host agent is no longer registered');
      if (project_ === 'ConditionalCheckFailed') throw errors.conflict('project id collision, retry');
    }
    throw err;
  }
}

/** Reads a project, or null. */
export async function getProject(db: Db, projectId: string): Promise<ProjectRecord | null> {
  const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: keys.project(projectId), ConsistentRead: true }));
  return out.Item ? toRecord(out.Item) : null;
}

/** Reads a project the caller owns; anything else is 404, never a hint that it exists (contract "Authentication" 1). */
export async function getOwnedProject(db: Db, projectId: string, accountId: string): Promise<ProjectRecord> {
  const p = await getProject(db, projectId);
  if (!p || p.owner !== accountId) throw errors.notFound(`project ${projectId} not found`);
  return p;
}

/**
 * Changes what `changes` names of a project the account owns (a null setting is removed) and answers
 * it as now recorded; 404 when there is no such project of the account any more (deleted meanwhile).
 */
export async function updateProject(db: Db, projectId: string, accountId: string, changes: ProjectChanges, at: string): Promise<ProjectRecord> {
  const set = ['updated_at = :at'];
  const remove: string[] = [];
  const names: Record<string, string> = { '#owner': 'owner' };
  const values: Record<string, unknown> = { ':at': at, ':owner': accountId };
  for (const field of ['name', 'auto_sleep_after_s', 'backup'] as const) {
    const value = changes[field];
    if (value === undefined) continue;
    names[`#${field}`] = field;
    if (value === null) remove.push(`#${field}`);
    else {
      set.push(`#${field} = :${field}`);
      values[`:${field}`] = value;
    }
  }
  try {
    const out = await db.doc.send(
      new UpdateCommand({
        TableName: db.table,
        Key: keys.project(projectId),
        UpdateExpression: `SET ${set.join(', ')}${remove.length > 0 ? ` REMOVE ${remove.join(', ')}` : ''}`,
        ConditionExpression: 'attribute_exists(pk) AND #owner = :owner',
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ReturnValues: 'ALL_NEW',
      }),
    );
    return toRecord(out.Attributes!);
  } catch (err) {
    if (isConditionFailure(err)) throw errors.notFound(`project ${projectId} not found`);
    throw err;
  }
}

/** Lists an account's projects, oldest first. */
export async function listProjects(db: Db, accountId: string, limit: number, cursor?: string): Promise<Page<ProjectRecord>> {
  const partition = keys.projectsOf(accountId);
  const page = await queryPage(
    db,
    {
      TableName: db.table,
      IndexName: GSI1.name,
      KeyConditionExpression: '#p = :p AND begins_with(#s, :prefix)',
      ExpressionAttributeNames: { '#p': GSI1.pk, '#s': GSI1.sk },
      ExpressionAttributeValues: { ':p': partition, ':prefix': prefixes.project },
    },
    // An index's LastEvaluatedKey names the table's key and the index's.
    { limit, cursor, partition: [GSI1.pk, partition], keyOf: (i) => ({ ...tableKeyOf(i), [GSI1.pk]: i[GSI1.pk], [GSI1.sk]: i[GSI1.sk] }) },
  );
  return { items: page.items.map(toRecord), nextCursor: page.nextCursor };
}

/**
 * Records a new state, guarded by the state it is expected to replace (docs/architecture.md
 * "Metadata in DynamoDB"). Answers the updated record, or null when the recorded state was no
 * longer `expected`. The record is marked `state_kept` only when its agent writes it with `kept`
 * (docs/lifecycle.md "Reconciliation"); every other state write removes the mark.
 */
export async function setProjectState(
  db: Db,
  projectId: string,
  expected: ProjectState,
  next: ProjectState,
  at: string,
  options: { agentId?: string; kept?: boolean } = {},
): Promise<ProjectRecord | null> {
  // `agentId`: the writer is the agent hosting the tenant (docs/lifecycle.md); any other agent's
  // write is refused the same way as a stale expected state.
  const byAgent = options.agentId !== undefined;
  const kept = byAgent && options.kept === true;
  try {
    const out = await db.doc.send(
      new UpdateCommand({
        TableName: db.table,
        Key: keys.project(projectId),
        UpdateExpression: `SET #state = :next, updated_at = :at${kept ? ', state_kept = :kept' : ' REMOVE state_kept'}`,
        ConditionExpression: `attribute_exists(pk) AND #state = :expected${byAgent ? ' AND agent_id = :agent' : ''}`,
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: {
          ':next': next,
          ':expected': expected,
          ':at': at,
          ...(byAgent ? { ':agent': options.agentId } : {}),
          ...(kept ? { ':kept': true } : {}),
        },
        ReturnValues: 'ALL_NEW',
      }),
    );
    return out.Attributes ? toRecord(out.Attributes) : null;
  } catch (err) {
    if (isConditionFailure(err)) return null;
    throw err;
  }
}

/**
 * Marks a recorded state `state_kept` (docs/lifecycle.md "Reconciliation") once the hosting agent has
 * seen it hold: only the very record it judged (same state, same `updated_at`) and only when it
 * hosts the project, so a later write is never marked by an earlier judgement. Answers whether the
 * mark was written.
 */
export async function keepProjectState(db: Db, projectId: string, judged: { state: ProjectState; updated_at: string }, agentId: string): Promise<boolean> {
  try {
    await db.doc.send(
      new UpdateCommand({
        TableName: db.table,
        Key: keys.project(projectId),
        UpdateExpression: 'SET state_kept = :kept',
        ConditionExpression: 'attribute_exists(pk) AND #state = :state AND updated_at = :at AND agent_id = :agent',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: { ':kept': true, ':state': judged.state, ':at': judged.updated_at, ':agent': agentId },
      }),
    );
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}
