// Builds the web console (docs/console.md): console/main.ts and everything it imports (the SDK in
// client/, preact, htm) into one script, console/style.css into one stylesheet, both named by their
// content hash, and console/index.html pointing at them. Everything is bundled: the page loads
// nothing from another origin. Called by build.mjs, which also embeds the files in the handlers
// bundles through `consoleAssetsPlugin`.
import { build } from 'esbuild';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const sha256 = (text) => createHash('sha256').update(text).digest('hex');

/** Builds the console into `outDir` (replaced whole) and answers its files as handlers/console-assets.ts describes them. */
export async function buildConsole(root, outDir) {
  const result = await build({
    entryPoints: { app: join(root, 'console/main.ts'), style: join(root, 'console/style.css') },
    bundle: true,
    write: false,
    outdir: outDir,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    legalComments: 'none',
    logLevel: 'warning',
  });
  const files = new Map();
  for (const out of result.outputFiles) files.set(out.path.slice(outDir.length + 1), out.text);
  const js = files.get('app.js');
  const css = files.get('style.css');
  if (js === undefined || css === undefined) throw new Error('console build: app.js or style.css missing');
  const jsName = `app-${sha256(js).slice(0, 12)}.js`;
  const cssName = `style-${sha256(css).slice(0, 12)}.css`;
  const html = readFileSync(join(root, 'console/index.html'), 'utf8').replace('%APP_JS%', jsName).replace('%STYLE_CSS%', cssName);
  if (html.includes('%')) throw new Error('console build: index.html has an unfilled placeholder');
  const assets = [
    { name: '', type: 'text/html; charset=utf-8', body: html, immutable: false },
    { name: jsName, type: 'text/javascript; charset=utf-8', body: js, immutable: true },
    { name: cssName, type: 'text/css; charset=utf-8', body: css, immutable: true },
  ].map((a) => ({ ...a, etag: `"${sha256(a.body)}"` }));
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  for (const a of assets) writeFileSync(join(outDir, a.name || 'index.html'), a.body);
  return assets;
}

/** esbuild plugin: handlers/console-assets.ts becomes the built files, so each bundle serves them from memory. */
export function consoleAssetsPlugin(assets) {
  return {
    name: 'console-assets',
    setup(b) {
      b.onLoad({ filter: /[\\/]handlers[\\/]console-assets\.ts$/ }, () => ({
        contents: `export const CONSOLE_ASSETS = ${JSON.stringify(assets)};`,
        loader: 'js',
      }));
    },
  };
}
