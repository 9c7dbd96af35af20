/**
 * The local stack (infra/local/stack.ts) as an end-to-end suite starts it: on the run's shared
 * DynamoDB Local with a table of its own, every port chosen free, agents' output kept for failures.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { inject } from 'vitest';
import { startStack, type Stack } from '../../infra/local/stack.ts';
import { REPO, uniqueTable } from './env.ts';

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

/**
 * A stack of `agents` agents in one table whose heartbeats show a dead agent within seconds (every
 * 300 ms, stale after 1.5 s), for the suites about several agents; `env` over those.
 */
export function startAgentsStack(dir: string, agents: number, env: Record<string, string> = {}): Promise<Stack> {
  return startStack({
    dir,
    dynamoEndpoint: inject('dynamoEndpoint'),
    agents,
    env: {
      SVCD_TABLE: uniqueTable('agents'),
      SVCD_PORT: '0',
      SVCD_AGENT_PORT: '0',
      SVCD_DATAPLANE_PORT: '0',
      SVCD_HEARTBEAT_MS: '300',
      SVCD_AGENT_STALE_MS: '1500',
      SVCD_ENGINE_STOP_TIMEOUT_MS: '3000',
      ...env,
    },
    agentOutput: 'collect',
    log: () => {},
  });
}

/**
 * The handlers' Node entry (dist/node-server.mjs, the production Node workers) beside a suite's
 * stack, on its settings and a free port; `env` over them. Resolves once it prints its ready line.
 */
export function startNodeEntry(stack: Stack, env: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(join(REPO, 'node_modules/.bin/node'), [join(REPO, 'dist/node-server.mjs')], {
    env: { PATH: process.env.PATH!, ...stack.env, SVCD_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stderr!.resume();
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (out.includes('\n')) resolve({ child, url: (JSON.parse(out.split('\n')[0]!) as { url: string }).url });
    });
    child.once('exit', (code) => reject(new Error(`node entry exited ${code}`)));
  });
}
