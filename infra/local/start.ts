/**
 * `npm start`: the whole service on embedded defaults at http://127.0.0.1:8787 (SVCD_PORT), state
 * kept under `.svc/`. One Ctrl-C (or SIGTERM) stops every process it started, engines included;
 * `npm start -- --help` lists the flags. How it keeps its processes in hand: docs/local-stack.md.
 */
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createNodeLog } from '../../shared/log-node.ts';
import { displayDir } from './lock.ts';
import { killTreeHard } from './processes.ts';
import { REPO_ROOT, startStack } from './stack.ts';

const USAGE = `Usage: npm start -- [options]        (or: node infra/local/start.ts [options])

Runs the whole service on this machine: DynamoDB Local, the host agent(s) and the handlers in
miniflare, behind one origin (default http://127.0.0.1:8787). Ctrl-C stops everything it started.

Options:
  --dir <path>          state directory: secrets, DynamoDB Local files, agent roots (default .svc).
                        One stack per directory: a second one on it refuses to start.
  --dynamodb-port <n>   DynamoDB Local's port (default SVCD_PORT + 3, or a free one if that is
                        taken; 0: any free one)
  --agents <n>          how many host agents, 1 to 64 (default 1)
  -h, --help            print this and exit

Settings are SVCD_* environment variables (docs/deploy.md "Every setting"). SVCD_PORT moves the
whole stack: the agent's internal port and its /v2 listener follow at +1 and +2 unless
SVCD_AGENT_PORT / SVCD_DATAPLANE_PORT are set. A second copy beside the first:
  SVCD_PORT=9000 npm start -- --dir .svc-9000
`;

let flags;
try {
  flags = parseArgs({
    options: {
      dir: { type: 'string' },
      'dynamodb-port': { type: 'string' },
      agents: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  }).values;
} catch (err) {
  console.error(`svc-cloud: ${(err as Error).message} (npm start -- --help lists the options)`);
  process.exit(2);
}
if (flags.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}

let dynamoPort: number | undefined;
if (flags['dynamodb-port'] !== undefined) {
  dynamoPort = Number(flags['dynamodb-port']);
  if (!/^\d+$/.test(flags['dynamodb-port']) || dynamoPort > 65535) {
    console.error(`svc-cloud: --dynamodb-port must be a port number, got ${flags['dynamodb-port']}`);
    process.exit(2);
  }
}

const agents = flags.agents === undefined ? 1 : Number(flags.agents);
if (!/^\d+$/.test(flags.agents ?? '1') || !Number.isInteger(agents) || agents < 1 || agents > 64) {
  console.error(`svc-cloud: --agents must be a whole number from 1 to 64, got ${flags.agents}`);
  process.exit(2);
}

/**
 * A terminal's Ctrl-C reaches this process twice: from the terminal (the whole foreground process
 * group) and from npm, which forwards it to its child. Signals this close to the first are the same
 * request (docs/local-stack.md); a later one forces the exit.
 */
const SAME_REQUEST_MS = 1_000;

/** Leaves at once, after SIGKILLing every process below this one: nothing it started outlives it. */
function exitNow(code: number): never {
  killTreeHard(process.pid);
  process.exit(code);
}

let firstSignalAt: number | undefined;
let stopStack: (() => Promise<void>) | undefined;
const stopped = (code: number) => () => exitNow(code);
const shutdown = (signal: string) => {
  if (firstSignalAt !== undefined) {
    if (Date.now() - firstSignalAt < SAME_REQUEST_MS) return;
    console.error(`svc-cloud: second ${signal}, killing what is left and exiting now`);
    exitNow(1);
  }
  firstSignalAt = Date.now();
  console.error('svc-cloud: stopping…');
  // During start-up the stack is stopped as soon as startStack answers (below).
  if (stopStack) stopStack().then(stopped(0), stopped(1));
};
// Installed before anything starts, so a signal during start-up still stops what has started.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => shutdown(signal));

/**
 * The process that started this one (npm, for `npm start`) is watched too: killed outright (`kill
 * -9`), it sends no signal, and this process would be re-parented and run on with everything it
 * started (docs/local-stack.md "Processes"). Its going is a stop request like SIGHUP. Not when
 * started as an orphan already (a parent of pid 1).
 */
const PARENT_POLL_MS = 250;
const parent = process.ppid;
if (parent > 1) {
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch);
    console.error(`svc-cloud: the process that started it (pid ${parent}) is gone, stopping`);
    shutdown('SIGHUP');
  }, PARENT_POLL_MS);
  watch.unref();
}

// The supervisor's own lines (and the front's), like every process of the stack: readable on a
// terminal, JSON otherwise (SVCD_LOG_FORMAT, SVCD_LOG_LEVEL; docs/observability.md "Logs"). The
// stack validates every setting itself; a bad one here falls back until it fails there.
const pick = <const T extends string>(value: string | undefined, allowed: readonly T[], fallback: T): T => (allowed.includes(value as T) ? (value as T) : fallback);
const { log } = createNodeLog({
  service: 'stack',
  level: pick(process.env.SVCD_LOG_LEVEL, ['debug', 'info', 'warn', 'error'] as const, 'info'),
  format: pick(process.env.SVCD_LOG_FORMAT, ['auto', 'json', 'pretty'] as const, 'auto'),
});

const dir = flags.dir ? resolve(flags.dir) : join(REPO_ROOT, '.svc');
try {
  const stack = await startStack({
    dir,
    env: process.env,
    persist: true,
    dynamoPort,
    agents,
    restartAgents: true,
    agentOutput: 'inherit',
    log,
  });
  stopStack = stack.stop;
  if (firstSignalAt !== undefined) await stack.stop().then(stopped(0), stopped(1));
  const url = stack.url;
  console.log(`svc-cloud ready at ${url}`);
  console.log(
    [
      `  state: ${displayDir(dir)}/ (secrets, DynamoDB Local files, agent roots; --dir to use another)`,
      `  stop:  Ctrl-C (stops DynamoDB Local, the agents, miniflare and every engine)`,
      `  open:  ${url}/console/ (the web console)`,
      `  try:   curl -s ${url}/v0/health`,
      `         curl -s -X POST ${url}/v0/signup -d '{"name":"Ada"}'`,
      `  more:  README.md "Walk-through with curl"; npm start -- --help`,
    ].join('\n'),
  );
} catch (err) {
  console.error(`svc-cloud: ${(err as Error).message}`);
  // A held directory started nothing; any other failure has stopped what it started.
  exitNow(1);
}
