// Builds what ships (docs/architecture.md): the handlers bundle for workers (miniflare locally). The host
// agent and the engine run from source on Node 24 (type stripping), so they need no build step.
import { build } from 'esbuild';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildClient } from './client/build.mjs';
import { buildConsole, consoleAssetsPlugin } from './console/build.mjs';

const root = dirname(fileURLToPath(import.meta.url));
const out = join(root, 'dist');
mkdirSync(out, { recursive: true });

// S3 answers XML, and the SDK's browser build parses it with DOMParser, which workerd lacks
// (multipart uploads and S3 error bodies fail with "DOMParser is not defined"). Its Node build's
// parser is plain JavaScript: use that one in the worker too.
const sdkXmlParser = {
  name: 'sdk-xml-parser',
  setup(b) {
    b.onResolve({ filter: /^\.\/xml-parser(\.js)?$/ }, (args) =>
      /[\\/]@aws-sdk[\\/]xml-builder[\\/]/.test(args.importer) ? { path: join(dirname(args.importer), 'xml-parser.js') } : undefined,
    );
  },
};

const started = Date.now();
// The web console (docs/console.md): built first, then embedded in every handlers bundle below.
const consoleAssets = consoleAssetsPlugin(await buildConsole(root, join(out, 'console')));
await build({
  entryPoints: [join(root, 'handlers/worker.ts')],
  plugins: [sdkXmlParser, consoleAssets],
  outfile: join(out, 'worker.js'),
  bundle: true,
  format: 'esm',
  // The AWS SDK only works in workerd when bundled for the browser with worker conditions.
  platform: 'browser',
  conditions: ['worker', 'browser'],
  target: 'es2023',
  sourcemap: 'linked',
  minify: false,
  logLevel: 'warning',
});

// The function-gateway entry and the Node entry: the same handlers, bundled for Node 24.
for (const [entry, outfile] of [
  ['handlers/gateway.ts', 'gateway.mjs'],
  ['handlers/node-server.ts', 'node-server.mjs'],
]) {
  await build({
    entryPoints: [join(root, entry)],
    outfile: join(out, outfile),
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node24',
    sourcemap: 'linked',
    logLevel: 'warning',
    plugins: [consoleAssets],
    // Bundled CommonJS dependencies may call require() for Node built-ins.
    banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
  });
}
console.log(`build: dist/console/, dist/worker.js, dist/gateway.mjs, dist/node-server.mjs in ${Date.now() - started} ms`);

// The SDK, its ORM adapters and the `svc` CLI (docs/sdk.md "Packaging"): what `npm pack` ships.
const clientStarted = Date.now();
await buildClient(root, out);
console.log(`build: dist/client/ (index.mjs, drizzle.mjs, kysely.mjs, svc.mjs, types/) in ${Date.now() - clientStarted} ms`);
