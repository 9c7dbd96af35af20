// Builds what ships (docs/architecture.md): the handlers bundle for workers (miniflare locally). The host
// agent and the engine run from source on Node 24 (type stripping), so they need no build step.
import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
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

// The SDK and the `svc` CLI (docs/sdk.md "Packaging"): what `npm pack` ships, so they run from the
// tarball with no loader and no dependency installed: the SDK for browsers and Node ≥ 20 (web APIs
// only), the CLI for Node ≥ 20 with its libraries bundled in, and the SDK's declarations.
const clientStarted = Date.now();
const clientOut = join(out, 'client');
rmSync(clientOut, { recursive: true, force: true });
await build({
  entryPoints: [join(root, 'client/index.ts')],
  outfile: join(clientOut, 'index.mjs'),
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  target: 'es2022',
  sourcemap: 'linked',
  logLevel: 'warning',
});
await build({
  entryPoints: [join(root, 'client/cli/main.ts')],
  outfile: join(clientOut, 'svc.mjs'),
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: 'linked',
  logLevel: 'warning',
  banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
});
const tsc = spawnSync(join(root, 'node_modules/.bin/tsc'), ['-p', join(root, 'client/tsconfig.types.json')], { stdio: 'inherit' });
if (tsc.status !== 0) throw new Error(`build: the SDK's declarations failed (tsc exited ${tsc.status})`);
// The sources import with `.ts`; the declarations sit beside `.d.ts` files, which `.js` specifiers
// find everywhere (in `import … from` and in the `import("…")` types tsc writes alike). tsc
// declares every file the SDK's sources reach; only those the SDK's own declarations import are
// kept (the service's modules a schema file imports for values are not).
const typesOut = join(clientOut, 'types');
const kept = new Set();
const visit = (path) => {
  if (kept.has(path)) return;
  kept.add(path);
  const text = readFileSync(path, 'utf8').replace(/((?:from|import)(?:\s+|\()['"]\.{1,2}\/[^'"]*?)\.ts(['"])/g, '$1.js$2');
  writeFileSync(path, text);
  for (const [, spec] of text.matchAll(/(?:from|import)(?:\s+|\()['"](\.{1,2}\/[^'"]+)\.js['"]/g)) visit(join(dirname(path), `${spec}.d.ts`));
};
visit(join(typesOut, 'client/index.d.ts'));
for (const file of readdirSync(typesOut, { recursive: true, encoding: 'utf8' })) {
  if (file.endsWith('.d.ts') && !kept.has(join(typesOut, file))) rmSync(join(typesOut, file));
}
for (const dir of readdirSync(typesOut, { recursive: true, encoding: 'utf8' }).sort().reverse()) {
  if (statSync(join(typesOut, dir)).isDirectory() && readdirSync(join(typesOut, dir)).length === 0) rmSync(join(typesOut, dir), { recursive: true });
}
console.log(`build: dist/client/index.mjs, dist/client/svc.mjs and dist/client/types/ in ${Date.now() - clientStarted} ms`);
