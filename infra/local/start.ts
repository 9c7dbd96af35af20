/**
 * `npm start`: the whole service on embedded defaults at http://127.0.0.1:8787 (SVCD_PORT), state
 * kept under `.svc/`. Ctrl-C or SIGTERM stops every child it started, engines included.
 *
 * Flags (after `npm start --`): `--dir <path>` stack directory (default `.svc`),
 * `--dynamodb-port <n>` DynamoDB Local's port (default 8790; 0 picks a free one),
 * `--agents <n>` how many host agents (default 1; each its own root under the stack directory and
 * its own ports, `/v2` taken round-robin over them: docs/dataplane.md "Several agents").
 */
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT, startStack } from './stack.ts';

let flags;
try {
  flags = parseArgs({
    options: { dir: { type: 'string' }, 'dynamodb-port': { type: 'string' }, agents: { type: 'string' } },
    strict: true,
  }).values;
} catch (err) {
  console.error(`svc-cloud: ${(err as Error).message}`);
  process.exit(2);
}
const dynamoPort = Number(flags['dynamodb-port'] ?? 8790);
if (!Number.isInteger(dynamoPort) || dynamoPort < 0 || dynamoPort > 65535) {
  console.error(`svc-cloud: --dynamodb-port must be a port number, got ${flags['dynamodb-port']}`);
  process.exit(2);
}

const agents = flags.agents === undefined ? 1 : Number(flags.agents);
if (!/^\d+$/.test(flags.agents ?? '1') || !Number.isInteger(agents) || agents < 1 || agents > 64) {
  console.error(`svc-cloud: --agents must be a whole number from 1 to 64, got ${flags.agents}`);
  process.exit(2);
}

let stopping = false;
let stopStack: (() => Promise<void>) | undefined;
let signals = 0;
const shutdown = (signal: string) => {
  if (++signals > 1) {
    console.error(`svc-cloud: second ${signal}, exiting now`);
    process.exit(1);
  }
  stopping = true;
  console.error('svc-cloud: stopping…');
  // During start-up the stack is stopped as soon as startStack answers (below).
  if (stopStack) stopStack().then(() => process.exit(0), () => process.exit(1));
};
// Installed before anything starts, so a signal during start-up still stops what has started.
process.on('SIGINT', () => shutdown('SIGINT'));
process.on('SIGTERM', () => shutdown('SIGTERM'));

try {
  const stack = await startStack({
    dir: flags.dir ? resolve(flags.dir) : join(REPO_ROOT, '.svc'),
    env: process.env,
    persist: true,
    dynamoPort,
    agents,
    agentOutput: 'inherit',
    log: (line) => console.error(line),
  });
  stopStack = stack.stop;
  if (stopping) {
    await stack.stop();
    process.exit(0);
  }
  console.log(`svc-cloud ready at ${stack.url}`);
} catch (err) {
  console.error(`svc-cloud: ${(err as Error).message}`);
  process.exit(1);
}
