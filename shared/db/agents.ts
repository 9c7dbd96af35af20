/** Repository: host-agent registrations (docs/architecture.md "The internal API") and their heartbeats. */
import { GetCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { Db } from './client.ts';
import { GSI1, keys } from './table.ts';

/** A host agent as registered. `tenants` counts the projects placed on it; `capacity` the engines it runs at once. */
export interface AgentRecord {
  agent_id: string;
  internal_url: string;
  dataplane_url: string;
  capacity: number;
  tenants: number;
  pin_ok: boolean;
  engine_version: string | null;
  started_at: string;
  heartbeat_at: string;
  /** Absent while the agent takes projects; `draining` or `lost` otherwise (docs/durability.md). */
  status?: 'draining' | 'lost';
  /** When `status` was set. */
  status_at?: string;
}

/** An agent item as its record (exported for reads batched with other items, e.g. a project's). */
export function toAgentRecord(item: Record<string, any>): AgentRecord {
  return {
    agent_id: item.agent_id,
    internal_url: item.internal_url,
    dataplane_url: item.dataplane_url,
    capacity: item.capacity,
    tenants: item.tenants ?? 0,
    pin_ok: item.pin_ok === true,
    engine_version: item.engine_version ?? null,
    started_at: item.started_at,
    heartbeat_at: item.heartbeat_at,
    ...(item.agent_status === 'draining' || item.agent_status === 'lost' ? { status: item.agent_status, status_at: item.agent_status_at } : {}),
  };
}

/** Registers (or re-registers) an agent, keeping its tenant count. */
export async function registerAgent(db: Db, agent: Omit<AgentRecord, 'tenants'>): Promise<void> {
  await db.doc.send(
    new UpdateCommand({
      TableName: db.table,
      Key: keys.agent(agent.agent_id),
      UpdateExpression:
        'SET #type = :type, agent_id = :id, internal_url = :iu, dataplane_url = :du, #cap = :cap, pin_ok = :pin, ' +
        'engine_version = :ev, started_at = :sa, heartbeat_at = :hb, #g1p = :g1p, #g1s = :id, tenants = if_not_exists(tenants, :zero)',
      ExpressionAttributeNames: { '#type': 'type', '#cap': 'capacity', '#g1p': GSI1.pk, '#g1s': GSI1.sk },
      ExpressionAttributeValues: {
        ':type': 'agent', ':id': agent.agent_id, ':iu': agent.internal_url, ':du': agent.dataplane_url,
        ':cap': agent.capacity, ':pin': agent.pin_ok, ':ev': agent.engine_version, ':sa': agent.started_at,
        ':hb': agent.heartbeat_at, ':g1p': keys.agents, ':zero': 0,
      },
    }),
  );
}

/** Records a heartbeat (and the current pin check). */
export async function heartbeatAgent(db: Db, agentId: string, at: string, pinOk: boolean): Promise<void> {
  await db.doc.send(
    new UpdateCommand({
      TableName: db.table,
      Key: keys.agent(agentId),
      UpdateExpression: 'SET heartbeat_at = :hb, pin_ok = :pin',
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeValues: { ':hb': at, ':pin': pinOk },
    }),
  );
}

/** Reads one agent, or null. */
export async function getAgent(db: Db, agentId: string): Promise<AgentRecord | null> {
  const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: keys.agent(agentId) }));
  return out.Item ? toAgentRecord(out.Item) : null;
}

/** Every registered agent. */
export async function listAgents(db: Db): Promise<AgentRecord[]> {
  const agents: AgentRecord[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await db.doc.send(
      new QueryCommand({
        TableName: db.table,
        IndexName: GSI1.name,
        KeyConditionExpression: '#p = :p',
        ExpressionAttributeNames: { '#p': GSI1.pk },
        ExpressionAttributeValues: { ':p': keys.agents },
        ExclusiveStartKey: start,
      }),
    );
    for (const item of out.Items ?? []) agents.push(toAgentRecord(item));
    start = out.LastEvaluatedKey;
  } while (start);
  return agents;
}

/** True when the agent heartbeated within `staleMs`, passed its pin check and was not declared lost. */
export function agentIsLive(agent: AgentRecord, staleMs: number, now: number = Date.now()): boolean {
  // A lost agent that came back serves nothing it hosted (docs/durability.md "Agent loss").
  return agent.pin_ok && agent.status !== 'lost' && now - Date.parse(agent.heartbeat_at) <= staleMs;
}

/**
 * The least-loaded live agent, or null when none is live (docs/lifecycle.md "Capacity"). A placed
 * project is only a reservation: `capacity` bounds the engines an agent runs at once, which its
 * wakeup enforces, so placement never refuses because of reserved counts. The load is the reserved
 * count relative to the agent's capacity (a bigger machine takes more); ties go to the agent id.
 */
export function choosePlacement(agents: AgentRecord[], staleMs: number, now: number = Date.now()): AgentRecord | null {
  // A draining or lost agent takes no new project (docs/durability.md "Drain").
  const candidates = agents.filter((a) => agentIsLive(a, staleMs, now) && a.status === undefined);
  candidates.sort((a, b) => a.tenants / a.capacity - b.tenants / b.capacity || a.agent_id.localeCompare(b.agent_id));
  return candidates[0] ?? null;
}
