/**
 * Host-agent executable (`bin/svc-agent`): parses settings once, starts the agent, prints one ready
 * line as JSON on stdout, and shuts down in phases on SIGTERM/SIGINT (a second signal forces exit).
 */
import { ConfigError, loadSettings } from '../shared/config.ts';
import { startAgent } from './agent.ts';

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

try {
  const agent = await startAgent(settings);
  console.log(JSON.stringify({ ready: true, agent_id: agent.ctx.agentId, internal_url: agent.internalUrl, pin_ok: agent.ctx.pin.ok }));
  let signals = 0;
  const shutdown = (signal: string) => {
    if (++signals > 1) {
      console.error(`svc-agent: second ${signal}, exiting now`);
      process.exit(1);
    }
    agent.stop().then(
      () => process.exit(0),
      (err) => {
        console.error(`svc-agent: shutdown failed: ${(err as Error).stack ?? err}`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
} catch (err) {
  console.error(`svc-agent: ${(err as Error).message}`);
  process.exit(1);
}
