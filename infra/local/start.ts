/**
 * `npm start`: the whole service on embedded defaults at http://127.0.0.1:8787 (SVCD_PORT), state
 * kept under `.svc/`. Ctrl-C or SIGTERM stops every child it started, engines included.
 */
import { ConfigError } from '../../shared/config.ts';
import { REPO_ROOT, startStack } from './stack.ts';
import { join } from 'node:path';

const dynamoPort = Number(process.env.SVCD_LOCAL_DYNAMODB_PORT ?? 8790);
const env = { ...process.env };
delete env.SVCD_LOCAL_DYNAMODB_PORT;

try {
  const stack = await startStack({
    dir: join(REPO_ROOT, '.svc'),
    env,
    persist: true,
    dynamoPort,
    agentOutput: 'inherit',
    log: (line) => console.error(line),
  });
  console.log(`svc-cloud ready at ${stack.url}`);
  let signals = 0;
  const shutdown = (signal: string) => {
    if (++signals > 1) {
      console.error(`svc-cloud: second ${signal}, exiting now`);
      process.exit(1);
    }
    console.error('svc-cloud: stopping…');
    stack.stop().then(() => process.exit(0), () => process.exit(1));
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
} catch (err) {
  console.error(`svc-cloud: ${err instanceof ConfigError ? err.message : (err as Error).message}`);
  process.exit(1);
}
