// Builds what ships (DESIGN §1): the handlers bundle for workers (miniflare locally). The host
// agent and the engine run from source on Node 24 (type stripping), so they need no build step.
import { build } from 'esbuild';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(fileURLToPath(import.meta.url));
const out = join(root, 'dist');
mkdirSync(out, { recursive: true });

const started = Date.now();
await build({
  entryPoints: [join(root, 'handlers/worker.ts')],
  outfile: join(out, 'worker.js'),
  bundle: true,
  format: 'esm',
  // DESIGN §7: the AWS SDK only works in workerd when bundled for the browser with worker conditions.
  platform: 'browser',
  conditions: ['worker', 'browser'],
  target: 'es2023',
  sourcemap: 'linked',
  minify: false,
  logLevel: 'warning',
});
console.log(`build: dist/worker.js in ${Date.now() - started} ms`);
