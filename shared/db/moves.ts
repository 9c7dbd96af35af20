/**
 * Repository: a project's placement changing hands (docs/durability.md "Relocation", "Agent loss").
 * The one commit point of every move is `moveProject`: one transaction that points the project at
 * its new agent (only if it still names the old one), moves its count between the two agents and
 * writes the receipt. Before it the project is the old agent's; after it, the new one's.
 */
import { ScanCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { errors } from '../errors.ts';
import type { ProjectState } from '../schemas/projects.ts';
import { cancellationReasons, isConditionFailure, type Db } from './client.ts';
import { toRecord, type ProjectRecord } from './projects.ts';
import { receiptPut, type Receipt } from './receipts.ts';
import { keys } from './table.ts';

/** Where a project came back from after its agent was lost (the project answer's `restored_from`). */
export interface RestoredFrom {
  /** The snapshot whose off-machine copy was restored; null when the project had none (its data is lost). */
  snapshot_id: string | null;
  /** When that snapshot was taken (the recovery point), or null. */
  snapshot_created_at: string | null;
  at: string;
  reason: 'agent_lost';
  lost_agent: string;
}

/** One move: the project, from which agent to which, the state it lands in, and its receipt. */
export interface Move {
  projectId: string;
  from: string;
  to: string;
  /** The state recorded on the new agent (never `running`: a move lands the tenant asleep). */
  state: Exclude<ProjectState, 'running'>;
  at: string;
  receipt: Receipt;
  restoredFrom?: RestoredFrom;
}

/**
 * Commits a move. 409 `conflict` when the project no longer names `from` (moved or deleted
 * meanwhile), 503 when the new agent is no longer registered: nothing is written then.
 */
export async function moveProject(db: Db, move: Move): Promise<void> {
  const restored = move.restoredFrom ? ', restored_from = :rf' : '';
  try {
    await db.doc.send(
      new TransactWriteCommand({
        TransactItems: [
          {
            Update: {
              TableName: db.table,
              Key: keys.project(move.projectId),
              // Unmarked (docs/lifecycle.md "Reconciliation"): the new agent confirms the state at the next GET.
              UpdateExpression: `SET agent_id = :to, #state = :state, updated_at = :at, moved_at = :at${restored} REMOVE state_kept`,
              ConditionExpression: 'attribute_exists(pk) AND agent_id = :from',
              ExpressionAttributeNames: { '#state': 'state' },
              ExpressionAttributeValues: {
                ':to': move.to,
                ':from': move.from,
                ':state': move.state,
                ':at': move.at,
                ...(move.restoredFrom ? { ':rf': move.restoredFrom } : {}),
              },
            },
          },
          { Update: { TableName: db.table, Key: keys.agent(move.from), UpdateExpression: 'ADD tenants :less', ExpressionAttributeValues: { ':less': -1 } } },
          {
            Update: {
              TableName: db.table,
              Key: keys.agent(move.to),
              UpdateExpression: 'ADD tenants :one',
              ConditionExpression: 'attribute_exists(pk)',
              ExpressionAttributeValues: { ':one': 1 },
            },
          },
          receiptPut(db, move.receipt),
        ],
      }),
    );
  } catch (err) {
    if (isConditionFailure(err)) {
      const [project, , target] = cancellationReasons(err);
      if (project === 'ConditionalCheckFailed') throw errors.conflict(`project ${move.projectId} is no longer hosted by agent ${move.from}`);
      if (target === 'ConditionalCheckFailed') throw errors.orchestrator(`agent ${move.to} is no longer registered`);
    }
    throw err;
  }
}

/**
 * Every project placed on `agentId`. A scan of the table, filtered: drains and agent losses are rare
 * operator actions, and the table has no index by agent (docs/durability.md "Costs").
 */
export async function projectsOn(db: Db, agentId: string): Promise<ProjectRecord[]> {
  const found: ProjectRecord[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await db.doc.send(
      new ScanCommand({
        TableName: db.table,
        FilterExpression: 'sk = :prj AND agent_id = :a',
        ExpressionAttributeValues: { ':prj': 'PRJ', ':a': agentId },
        ExclusiveStartKey: start,
      }),
    );
    for (const item of out.Items ?? []) found.push(toRecord(item));
    start = out.LastEvaluatedKey;
  } while (start);
  return found;
}

/** What an agent's registration says beyond its heartbeat: absent (serving), draining, or declared lost. */
export type AgentStatus = 'draining' | 'lost';

/**
 * Sets an agent's status. `lost` is written only while its heartbeat is still `heartbeatAt` (the
 * one that was judged too old), so an agent that came back meanwhile is never declared lost; false
 * when that condition failed.
 */
export async function setAgentStatus(db: Db, agentId: string, status: AgentStatus | null, heartbeatAt?: string): Promise<boolean> {
  const condition = heartbeatAt === undefined ? 'attribute_exists(pk)' : 'attribute_exists(pk) AND heartbeat_at = :hb';
  try {
    await db.doc.send(
      new UpdateCommand({
        TableName: db.table,
        Key: keys.agent(agentId),
        UpdateExpression: status === null ? 'REMOVE agent_status, agent_status_at' : 'SET agent_status = :s, agent_status_at = :at',
        ConditionExpression: condition,
        ...(status === null && heartbeatAt === undefined
          ? {}
          : { ExpressionAttributeValues: { ...(status === null ? {} : { ':s': status, ':at': new Date().toISOString() }), ...(heartbeatAt === undefined ? {} : { ':hb': heartbeatAt }) } }),
      }),
    );
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}
