/**
 * Runs the handlers bundle (dist/worker.js) inside miniflare (workerd) on SVCD_HOST:SVCD_PORT, with
 * every `SVCD_*` setting as a binding. A process of its own because miniflare installs exit hooks on
 * SIGINT/SIGTERM: the stack supervisor stays in charge of its own shutdown. Prints one ready line.
 */
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import { ConfigError, loadSettings } from '../../shared/config.ts';
import { REPO_ROOT } from './paths.ts';

const bindings: Record<string, string> = {};
for (const [k, v] of Object.entries(process.env)) if (k.startsWith('SVCD_') && v) bindings[k] = v;

try {
  const settings = loadSettings(bindings);
  const mf = new Miniflare({
    modules: true,
    scriptPath: join(REPO_ROOT, 'dist/worker.js'),
    compatibilityDate: '2025-09-01',
    bindings,
    host: settings.SVCD_HOST,
    port: settings.SVCD_PORT,
  });
  const url = (await mf.ready).toString().replace(/\/$/, '');
  // miniflare's exit hooks call process.exit before workerd is gone; this process owns its
  // shutdown instead: dispose (which waits for workerd to exit), then leave.
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.removeAllListeners(signal);
    process.once(signal, () => {
      mf.dispose().then(() => process.exit(0), () => process.exit(1));
    });
  }
  console.log(JSON.stringify({ ready: true, url }));
} catch (err) {
  console.error(`worker-host: ${err instanceof ConfigError ? err.message : (err as Error).message}`);
  process.exit(1);
}
