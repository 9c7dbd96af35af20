/**
 * Deps for unit tests of handlers/domain/: a real table on the run's DynamoDB Local and a registered,
 * heartbeating agent, but an agent client that records each internal call and answers from `answer`
 * instead of reaching a host agent.
 */
import { buildDeps } from '../../handlers/deps.ts';
import type { Deps } from '../../handlers/context.ts';
import type { AgentClient, AgentTarget, CallOptions } from '../../shared/agent-client.ts';
import { registerAgent } from '../../shared/db/agents.ts';
import { newId } from '../../shared/ids.ts';
import { testDeployment } from './env.ts';

/** One internal call the domain made. */
export interface AgentCall {
  agentId: string;
  method: string;
  path: string;
  body: unknown;
}

/** Deps over a fresh table, the id of its one live agent, and the internal calls made so far. */
export async function domainDeps(
  answer: (call: AgentCall) => unknown = () => ({}),
): Promise<{ deps: Deps; agentId: string; calls: AgentCall[] }> {
  const { env, db } = await testDeployment();
  const calls: AgentCall[] = [];
  const record = (agent: AgentTarget, method: string, path: string, options: CallOptions = {}): AgentCall => {
    const call = { agentId: agent.agent_id, method, path, body: options.body };
    calls.push(call);
    return call;
  };
  const agents: AgentClient = {
    async json<T>(agent: AgentTarget, method: string, path: string, options?: CallOptions): Promise<T> {
      return answer(record(agent, method, path, options)) as T;
    },
    async fetch(agent, method, path, options) {
      return Response.json(answer(record(agent, method, path, options)));
    },
  };
  const agentId = newId('agt');
  const now = new Date().toISOString();
  await registerAgent(db, {
    agent_id: agentId,
    internal_url: 'http://127.0.0.1:9',
    dataplane_url: 'http://127.0.0.1:9',
    capacity: 4,
    pin_ok: true,
    engine_version: null,
    started_at: now,
    heartbeat_at: now,
  });
  return { deps: { ...buildDeps(env, () => {}), db, agents }, agentId, calls };
}
