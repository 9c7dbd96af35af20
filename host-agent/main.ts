/**
 * Host-agent executable (`bin/svc-agent`): parses settings once, starts the agent, prints one ready
 * line as JSON on stdout, and shuts down in phases on SIGTERM/SIGINT (a second signal forces exit).
 *
 * `--stop-on-stdin-eof`: stdin is a pipe from a supervisor (the local stack), and its end means the
 * supervisor is gone, however it ended: the agent then stops as on SIGTERM, engines included, so it
 * never outlives the stack (docs/local-stack.md "Processes"). Off by default: under systemd stdin is
 * /dev/null, which ends at once.
 *
 * `--held-listeners SETTING=port,…`: the supervisor (the local stack, over the IPC channel it spawns
 * the agent with) holds these listeners and passes them on (shared/http/held-listeners.ts); the
 * agent binds none of them itself (docs/local-stack.md "Ports"). With the `SVCD_PORT` one, the agent
 * is the stack's one origin (docs/local-stack.md "One origin"): `--origin-handlers <url>` is where it
 * relays what it does not serve itself, `--origin-metrics <url,…>` the agents' metrics listeners
 * (`/metrics`, `/metrics/<n>`), `--origin-url <url>` the base URL clients reach.
 */
import { parseArgs } from 'node:util';
import { parseHeldPorts, ReceivedListeners } from '../shared/http/held-listeners.ts';
import { ConfigError, loadSettings } from '../shared/config.ts';
import { createNodeLog } from '../shared/log-node.ts';
import { startAgent, type Agent } from './agent.ts';
import { ADMIN_COMMANDS, runAdminCommand } from './admin-cli.ts';

// Operator commands (`svc-agent drain`, `undrain`, `lost AGENT_ID`) talk to the running agent and exit.
if ((ADMIN_COMMANDS as readonly string[]).includes(process.argv[2] ?? '')) {
  process.exit(await runAdminCommand(process.argv.slice(2), process.env, (line) => console.log(line)));
}

let flags;
try {
  flags = parseArgs({
    options: {
      'stop-on-stdin-eof': { type: 'boolean' },
      'held-listeners': { type: 'string' },
      'origin-handlers': { type: 'string' },
      'origin-metrics': { type: 'string' },
      'origin-url': { type: 'string' },
    },
    strict: true,
  }).values;
} catch (err) {
  console.error(`svc-agent: ${(err as Error).message}`);
  process.exit(2);
}

let settings;
try {
  settings = loadSettings(process.env);
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(`svc-agent: ${err.message}`);
    process.exit(2);
  }
  throw err;
}

// pino: JSON lines on stderr, readable ones on a terminal (docs/observability.md "Logs"). What it
// still holds is flushed before every exit.
const { log, flush } = createNodeLog({ service: 'agent', level: settings.SVCD_LOG_LEVEL, format: settings.SVCD_LOG_FORMAT });
const exit = (code: number): never => {
  flush();
  process.exit(code);
};

// Stop requests are taken from the start, so one that arrives while the agent starts is kept and
// carried out as soon as it has started (it may have adopted engines by then).
let agent: Agent | undefined;
let stopRequested = false;
let signals = 0;
const stop = () => {
  stopRequested = true;
  // The held listeners go back to the supervisor at once: its fallback serves them while this stops.
  held?.close();
  agent?.stop().then(
    () => exit(0),
    (err) => {
      console.error(`svc-agent: shutdown failed: ${(err as Error).stack ?? err}`);
      exit(1);
    },
  );
};
const onSignal = (signal: string) => {
  if (++signals > 1) {
    console.error(`svc-agent: second ${signal}, exiting now`);
    exit(1);
  }
  stop();
};
process.on('SIGTERM', () => onSignal('SIGTERM'));
process.on('SIGINT', () => onSignal('SIGINT'));
if (flags['stop-on-stdin-eof']) {
  // The supervisor's end is one more reason to stop, never a "second signal": a supervisor killed
  // while it was stopping the agent must not cut the engines' graceful stop short.
  const parentGone = () => {
    if (stopRequested) return;
    console.error('svc-agent: the supervisor is gone (stdin closed), stopping');
    stop();
  };
  for (const event of ['end', 'close', 'error'] as const) process.stdin.on(event, parentGone);
  process.stdin.resume();
  process.on('disconnect', parentGone);
}
// Listened to from the start: the supervisor gives the listeners it holds as soon as the agent runs.
let held: ReceivedListeners | undefined;
try {
  if (flags['held-listeners'] !== undefined && process.send) held = new ReceivedListeners(parseHeldPorts(flags['held-listeners']));
} catch (err) {
  console.error(`svc-agent: ${(err as Error).message}`);
  process.exit(2);
}
const originHandlers = flags['origin-handlers'];
const origin = originHandlers
  ? { targets: { handlers: originHandlers, metrics: (flags['origin-metrics'] ?? '').split(',').filter(Boolean) }, url: flags['origin-url'] ?? originHandlers }
  : undefined;

try {
  agent = await startAgent(settings, { log, held, origin });
  console.log(
    JSON.stringify({ ready: true, agent_id: agent.ctx.agentId, internal_url: agent.internalUrl, metrics_url: agent.metricsUrl, pin_ok: agent.ctx.pin.ok }),
  );
  if (stopRequested) stop();
} catch (err) {
  console.error(`svc-agent: ${(err as Error).message}`);
  exit(1);
}
