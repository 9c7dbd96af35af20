/**
 * The local stack (infra/local/stack.ts) as an end-to-end suite starts it: on the run's shared
 * DynamoDB Local with a table of its own, every port chosen free, agents' output kept for failures.
 */
import { inject } from 'vitest';
import { startStack, type Stack } from '../../infra/local/stack.ts';
import { uniqueTable } from './env.ts';

/** Starts a stack in `dir` with `env` over the defaults above; `log` gets the front's lines (one per request it relays). */
export function startSuiteStack(dir: string, env: Record<string, string> = {}, log: (line: string) => void = () => {}): Promise<Stack> {
  return startStack({
    dir,
    dynamoEndpoint: inject('dynamoEndpoint'),
    env: { SVCD_TABLE: uniqueTable(), SVCD_PORT: '0', SVCD_AGENT_PORT: '0', SVCD_DATAPLANE_PORT: '0', ...env },
    agentOutput: 'collect',
    log,
  });
}
