/**
 * A function from source (docs/functions.md "From source"): TypeScript, JSX and npm imports bundled
 * with esbuild into the one ES module the service takes ("Deploy": one module, `node:` imports
 * only), for the runtime functions run in (workerd: the `workerd`, `worker` and `browser` export
 * conditions, as wrangler bundles), with the bundle's source map kept inside it so stack traces in
 * the function's logs name the source files (./stack-map.ts).
 *
 * esbuild is a dependency of the CLI loaded only here, so other commands never load it.
 */
import { builtinModules } from 'node:module';
import { relative, resolve } from 'node:path';
import type { BuildOptions, BuildResult, Plugin } from 'esbuild';
import { CliError } from '../errors.ts';
import { stackMapPrelude } from './stack-map.ts';

/** Extensions deployed as they are (already a module); anything else is bundled. */
const PREBUNDLED = /\.(m?js)$/i;

/** Whether `file` is bundled before deploying: sources always, a `.js`/`.mjs` only when asked. */
export function needsBundle(file: string, asked: boolean | undefined): boolean {
  if (file === '-') return false;
  return asked ?? !PREBUNDLED.test(file);
}

/** A bundled function: the module's text, its size and the input files (watched by `functions dev`). */
export interface Bundle {
  code: string;
  inputs: string[];
}

/** Node's built-ins, with or without `node:`, stay imports of `node:` (workerd's `nodejs_compat`). */
const nodeBuiltins: Plugin = {
  name: 'svc-node-builtins',
  setup(build) {
    const names = new Set(builtinModules.filter((m) => !m.startsWith('_')));
    build.onResolve({ filter: /^(node:)?[a-z_/]+$/ }, (args) => {
      const bare = args.path.replace(/^node:/, '');
      if (!args.path.startsWith('node:') && !names.has(bare)) return undefined;
      return { path: `node:${bare}`, external: true };
    });
  },
};

/** The esbuild options of a function's bundle, in `cwd` (paths in stacks are relative to it). */
export function bundleOptions(entry: string, cwd: string): BuildOptions & { write: false; metafile: true } {
  return {
    entryPoints: [resolve(cwd, entry)],
    absWorkingDir: cwd,
    bundle: true,
    write: false,
    metafile: true,
    format: 'esm',
    platform: 'neutral',
    mainFields: ['workerd', 'worker', 'browser', 'module', 'main'],
    conditions: ['workerd', 'worker', 'browser'],
    resolveExtensions: ['.ts', '.tsx', '.mts', '.js', '.jsx', '.mjs', '.cjs', '.json'],
    target: 'es2022',
    // The output's name only decides how the map names the sources: relative to `cwd`.
    outfile: resolve(cwd, '.svc-function.js'),
    sourcemap: 'external',
    sourcesContent: false,
    plugins: [nodeBuiltins],
    logLevel: 'silent',
  };
}

/** The module of a finished build: the stack-map prelude, then the bundle (its map shifted by the prelude's lines). */
export function moduleOf(result: BuildResult<{ write: false; metafile: true }>, cwd: string): Bundle {
  const js = result.outputFiles.find((f) => f.path.endsWith('.js'));
  const map = result.outputFiles.find((f) => f.path.endsWith('.js.map'));
  if (!js || !map) throw new CliError('esbuild wrote no module');
  const parsed = JSON.parse(map.text) as { sources: string[]; mappings: string };
  const prelude = stackMapPrelude({ sources: parsed.sources, mappings: parsed.mappings });
  const shifted = { sources: parsed.sources, mappings: `${';'.repeat(prelude.lines)}${parsed.mappings}` };
  const text = stackMapPrelude(shifted).text;
  // The bundle's own `//# sourceMappingURL=` names a file that is not deployed.
  const code = `${text}${js.text.replace(/\n\/\/# sourceMappingURL=[^\n]*\n?$/, '\n')}`;
  const inputs = Object.keys(result.metafile.inputs).map((p) => resolve(cwd, p.replace(/^[a-z-]+:/, '')));
  return { code, inputs };
}

/** esbuild, or how to install it. */
export async function loadEsbuild(): Promise<typeof import('esbuild')> {
  try {
    return await import('esbuild');
  } catch {
    throw new CliError('bundling a function needs esbuild, which is not installed', 'install it beside the CLI: `npm install esbuild` (or deploy a bundled .js)');
  }
}

/** Bundles `entry` (relative to `cwd`); a build error is a CliError naming the file and line. */
export async function bundleFunction(entry: string, cwd: string): Promise<Bundle> {
  const esbuild = await loadEsbuild();
  let result: BuildResult<{ write: false; metafile: true }>;
  try {
    result = await esbuild.build(bundleOptions(entry, cwd));
  } catch (err) {
    throw new CliError(`${relative(cwd, resolve(cwd, entry))} did not bundle:\n${buildErrors(err)}`);
  }
  return moduleOf(result, cwd);
}

/** esbuild's errors, one `file:line:column: text` each. */
export function buildErrors(err: unknown): string {
  const errors = (err as { errors?: { text: string; location?: { file: string; line: number; column: number } | null }[] }).errors;
  if (!errors?.length) return `  ${(err as Error).message}`;
  return errors.map((e) => `  ${e.location ? `${e.location.file}:${e.location.line}:${e.location.column + 1}: ` : ''}${e.text}`).join('\n');
}
