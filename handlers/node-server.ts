/**
 * Node entry: the same handlers as a plain long-lived HTTP server, for Node workers behind a load
 * balancer. Production routes the byte-heavy and streaming paths (object bytes, realtime subscribe,
 * `/v2`) here, since function gateways cap body sizes and cannot hold event streams (docs/deploy.md).
 */
import { ConfigError, loadSettings } from '../shared/config.ts';
import { createNodeLog } from '../shared/log-node.ts';
import { serveFetch } from '../shared/http/node-http.ts';
import { nodeTransport } from '../shared/db/transport-node.ts';
import { buildDeps } from './deps.ts';
import { createApp } from './index.ts';

try {
  const settings = loadSettings(process.env);
  // pino on Node: JSON lines on stderr, readable ones on a terminal (docs/observability.md "Logs").
  const { log, flush } = createNodeLog({ service: 'handlers', level: settings.SVCD_LOG_LEVEL, format: settings.SVCD_LOG_FORMAT });
  const deps = buildDeps(process.env, log, { transport: nodeTransport() });
  const app = createApp(deps);
  const served = await serveFetch((request) => app.fetch(request), {
    host: deps.settings.SVCD_HOST,
    port: deps.settings.SVCD_PORT,
    setting: 'SVCD_PORT',
    onError: (err) => deps.log('node-server: a request failed', { level: 'error', err }),
  });
  console.log(JSON.stringify({ ready: true, url: served.url }));
  let signals = 0;
  const stop = () => {
    if (++signals > 1) process.exit(1);
    served.close().then(() => {
      flush();
      process.exit(0);
    });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
} catch (err) {
  console.error(`svc-handlers: ${err instanceof ConfigError ? err.message : (err as Error).message}`);
  process.exit(err instanceof ConfigError ? 2 : 1);
}
