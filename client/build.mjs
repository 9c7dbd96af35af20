// Builds what `npm pack` ships (docs/sdk.md "Packaging"), so it runs from the tarball with no loader:
// the SDK for browsers and Node ≥ 20 (web APIs only, nothing imported), the ORM adapters (importing
// only their ORM, an optional peer dependency), the CLI for Node ≥ 20 with its libraries bundled in
// (esbuild, which it runs, is the package's one dependency; workerd an optional peer), and the
// declarations of all three entries. Called by build.mjs.
import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/** What the CLI loads at run time instead of bundling: native binaries (package.json `dependencies`, `peerDependencies`). */
export const CLI_EXTERNAL = ['esbuild', 'workerd'];
/** The ORMs the adapters are written against (package.json `peerDependencies`). */
export const ORM_EXTERNAL = ['drizzle-orm', 'kysely'];
const ENTRIES = ['index', 'drizzle', 'kysely'];

/** Builds dist/client/ (replaced whole) from client/. */
export async function buildClient(root, out) {
  const clientOut = join(out, 'client');
  rmSync(clientOut, { recursive: true, force: true });
  await build({
    entryPoints: ENTRIES.map((name) => join(root, `client/${name}.ts`)),
    outdir: clientOut,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    external: ORM_EXTERNAL,
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
    external: CLI_EXTERNAL,
    sourcemap: 'linked',
    logLevel: 'warning',
    banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
  });
  // `svc functions dev` runs the agent's function supervisor as it is (docs/functions.md "Running locally").
  cpSync(join(root, 'host-agent/functions/supervisor.js'), join(clientOut, 'supervisor.js'));
  buildDeclarations(root, join(clientOut, 'types'));
}

/**
 * tsc declares every file the entries reach; their `.ts` specifiers become `.js` (which find the
 * `.d.ts` beside them in `import … from` and `import("…")` alike) and only the files the entries'
 * declarations reach are kept (not the service's modules a schema file imports for values). The
 * route declarations type their answers with zod, which the package does not install: zod's own
 * declarations (MIT) are copied to types/zod/ and `zod` specifiers point there, so the types are
 * whole without zod and the same as the service's.
 */
function buildDeclarations(root, typesOut) {
  const tsc = spawnSync(join(root, 'node_modules/.bin/tsc'), ['-p', join(root, 'client/tsconfig.types.json')], { stdio: 'inherit' });
  if (tsc.status !== 0) throw new Error(`build: the SDK's declarations failed (tsc exited ${tsc.status})`);
  const zodIn = join(root, 'node_modules/zod');
  const zodOut = join(typesOut, 'zod');
  const kept = new Set();
  const visit = (path) => {
    if (kept.has(path)) return;
    kept.add(path);
    const toZod = (sub) => {
      const target = relative(dirname(path), join(zodOut, sub, 'index.js')).replaceAll('\\', '/');
      return target.startsWith('.') ? target : `./${target}`;
    };
    const text = readFileSync(path, 'utf8')
      .replace(/((?:from|import)(?:\s+|\()['"]\.{1,2}\/[^'"]*?)\.ts(['"])/g, '$1.js$2')
      .replace(/((?:from|import)(?:\s+|\()['"])zod(\/v4\/core)?(['"])/g, (_, head, sub, tail) => `${head}${toZod(sub ?? '')}${tail}`);
    writeFileSync(path, text);
    for (const [, spec] of text.matchAll(/(?:from|import)(?:\s+|\()['"](\.{1,2}\/[^'"]+)\.js['"]/g)) {
      const target = join(dirname(path), `${spec}.d.ts`);
      if (target.startsWith(zodOut) && !kept.has(target)) {
        mkdirSync(dirname(target), { recursive: true });
        cpSync(join(zodIn, relative(zodOut, target)), target);
      }
      visit(target);
    }
  };
  for (const name of ENTRIES) visit(join(typesOut, `client/${name}.d.ts`));
  if (kept.has(join(zodOut, 'index.d.ts')) || kept.has(join(zodOut, 'v4/core/index.d.ts'))) cpSync(join(zodIn, 'LICENSE'), join(zodOut, 'LICENSE'));
  for (const file of readdirSync(typesOut, { recursive: true, encoding: 'utf8' })) {
    if (file.endsWith('.d.ts') && !kept.has(join(typesOut, file))) rmSync(join(typesOut, file));
  }
  for (const dir of readdirSync(typesOut, { recursive: true, encoding: 'utf8' }).sort().reverse()) {
    if (statSync(join(typesOut, dir)).isDirectory() && readdirSync(join(typesOut, dir)).length === 0) rmSync(join(typesOut, dir), { recursive: true });
  }
}
