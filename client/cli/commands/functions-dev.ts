/**
 * `svc functions dev NAME FILE` (docs/functions.md "Running locally"): the function bundled as
 * `deploy` bundles it, served on this machine by the runtime the service runs functions in
 * (../functions/dev-runtime.ts), rebuilt by esbuild's watch mode on every change of a file it
 * imports (and of the `--env-file`) and reloaded in a fresh isolate; Ctrl-C stops it.
 */
import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as util from 'node:util';
import type { Command } from 'commander';
import type { BuildResult } from 'esbuild';
import { ID_PATTERNS } from '../../../shared/ids.ts';
import type { Cli } from '../context.ts';
import { CliError, UsageError } from '../errors.ts';
import { buildErrors, bundleOptions, loadEsbuild, moduleOf } from '../functions/bundle.ts';
import { DevRuntime } from '../functions/dev-runtime.ts';
import type { Registry } from '../program.ts';

/** The port `functions dev` listens on unless told (the local stack takes 8787 to 8791). */
export const DEV_PORT = 8799;
const NAME = /^[a-z][a-z0-9-]{0,62}$/;

interface DevOptions {
  envFile?: string;
  port?: string;
  host?: string;
  memoryMb?: string;
}

/** Registers `functions dev`. */
export function devCommand(functions: Command, r: Registry): void {
  functions
    .command('dev')
    .description('serve the function on this machine in the runtime the service uses (workerd), rebuilt and reloaded on every change; Ctrl-C stops')
    .argument('<name>', 'the function name (its FUNCTION_NAME)')
    .argument('<file>', 'the entry: TypeScript or JavaScript, bundled with its imports')
    .option('--env-file <file>', 'its environment, as the project\'s secrets would be: NAME=value lines (reloaded when it changes)')
    .option('--port <port>', `the port to listen on (default ${DEV_PORT}; 0 picks a free one)`)
    .option('--host <host>', 'the address to listen on (default 127.0.0.1)')
    .option('--memory-mb <mib>', 'heap limit of the isolate, 32 to 1024 (default 128)')
    .action(r.action(async (cli, name: string, file: string, options: DevOptions) => runDev(cli, name, file, options)));
}

/** The environment: the file's variables, then the three the service sets last (docs/functions.md "Environment"). */
function environment(cli: Cli, name: string, envFile: string | undefined, origin: string): Record<string, string> {
  let vars: Record<string, string> = {};
  if (envFile !== undefined) {
    try {
      vars = parseEnvText(readFileSync(envFile, 'utf8'));
    } catch (err) {
      throw new CliError(`cannot read ${envFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  const linked = cli.projectOption && ID_PATTERNS.prj.test(cli.projectOption) ? cli.projectOption : safeLink(cli);
  return { ...vars, ...(linked ? { PROJECT_ID: linked } : {}), FUNCTION_NAME: name, CLOUD_ORIGIN: origin };
}

/**
 * `NAME=value` lines: Node's own reader (`util.parseEnv`, Node 20.12 and later), else the same rules
 * in short — `#` comments, `export ` prefixes, values in single, double (with `\n`) or no quotes.
 */
export function parseEnvText(text: string): Record<string, string> {
  const native = (util as { parseEnv?: (content: string) => Record<string, string | undefined> }).parseEnv;
  if (native) return Object.fromEntries(Object.entries(native(text)).filter((e): e is [string, string] => e[1] !== undefined));
  const vars: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const m = /^\s*(?:export\s+)?([\w.-]+)\s*=\s*(?:'([^']*)'|"((?:[^"\\]|\\.)*)"|([^#]*?))\s*(?:#.*)?$/.exec(line);
    if (!m) continue;
    vars[m[1]!] = m[2] ?? (m[3] !== undefined ? m[3].replace(/\\n/g, '\n') : (m[4] ?? ''));
  }
  return vars;
}

function safeLink(cli: Cli): string | undefined {
  try {
    return cli.link()?.link.project_id;
  } catch {
    return undefined;
  }
}

function portOf(value: string | undefined): number {
  if (value === undefined) return DEV_PORT;
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) throw new UsageError(`--port must be a port number, 0 to 65535 (got ${JSON.stringify(value)})`);
  return Number(value);
}

async function runDev(cli: Cli, name: string, file: string, options: DevOptions): Promise<number> {
  if (!NAME.test(name)) throw new UsageError(`NAME must match ^[a-z][a-z0-9-]{0,62}$ (got ${JSON.stringify(name)})`);
  const port = portOf(options.port);
  const memoryMb = options.memoryMb === undefined ? 128 : Number(options.memoryMb);
  if (!Number.isInteger(memoryMb) || memoryMb < 32 || memoryMb > 1024) throw new UsageError('--memory-mb must be a whole number from 32 to 1024');
  const origin = cli.baseUrl();
  let env = environment(cli, name, options.envFile, origin);
  const esbuild = await loadEsbuild();
  const c = cli.out.ce;
  const runtime = await DevRuntime.start({
    memoryMb,
    onLine: (stream, text) => (stream === 'stdout' ? cli.io.stdout.write(`${text}\n`) : cli.io.stderr.write(`${stream === 'agent' ? c.yellow(text) : text}\n`)),
  });
  const server = createServer((req, res) => {
    const started = Date.now();
    runtime.serve(req, res, (status) => cli.out.note(c.dim(`${req.method} ${req.url} ${status} (${Date.now() - started} ms)`)));
  });
  let url = '';
  try {
    url = await listen(server, port, options.host ?? '127.0.0.1');
  } catch (err) {
    await runtime.stop();
    throw new CliError(`cannot listen on port ${port}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, 'pick another with --port');
  }
  let last: string | null = null;
  let builds = 0;
  /** Loads the last good build (again, with a new environment) and says whether it starts. */
  const load = async (reason: string) => {
    if (last === null) return;
    runtime.load(last, env, url);
    const problem = await runtime.check().catch((err: Error) => err.message);
    if (problem) cli.out.note(`${c.red('error:')} the function does not start: ${problem}`);
    else cli.out.note(`${c.green(reason)} ${name} at ${url} ${c.dim('(Ctrl-C to stop)')}`);
  };
  const context = await watchedBuild(esbuild, cli, file, async (code) => {
    builds++;
    if (code === null) return;
    last = code;
    await load(builds === 1 ? 'serving' : 'reloaded');
  });
  if (options.envFile !== undefined) {
    const envFile = options.envFile;
    watchFile(envFile, { interval: 300 }, () => {
      try {
        env = environment(cli, name, envFile, origin);
        void load(`reloaded (${envFile} changed)`);
      } catch (err) {
        cli.out.note(`${c.red('error:')} ${(err as Error).message}`);
      }
    });
  }
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await context.watch();
    const ended = await Promise.race([new Promise<'stop'>((r) => stop.signal.addEventListener('abort', () => r('stop'))), runtime.exited.then(() => 'exited' as const)]);
    if (ended === 'exited') cli.out.note(`${c.red('error:')} the runtime (workerd) exited`);
    return ended === 'stop' ? 0 : 1;
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    if (options.envFile !== undefined) unwatchFile(options.envFile);
    await context.dispose();
    server.close();
    server.closeAllConnections();
    await runtime.stop();
  }
}

/**
 * esbuild's context for `file`, calling `onBuild` after each build with the module, or null when
 * it did not bundle (the errors printed; the previous build keeps serving).
 */
function watchedBuild(esbuild: typeof import('esbuild'), cli: Cli, file: string, onBuild: (code: string | null) => Promise<void>) {
  const options = bundleOptions(file, cli.cwd);
  return esbuild.context({
    ...options,
    plugins: [
      ...(options.plugins ?? []),
      {
        name: 'svc-dev-reload',
        setup(build) {
          build.onEnd(async (result) => {
            if (result.errors.length > 0) {
              cli.out.note(`${cli.out.ce.red('error:')} ${file} did not bundle:\n${buildErrors(result)}`);
              return onBuild(null);
            }
            return onBuild(moduleOf(result as BuildResult<{ write: false; metafile: true }>, cli.cwd).code);
          });
        },
      },
    ],
  });
}

function listen(server: Server, port: number, host: string): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const address = server.address() as AddressInfo;
      resolve(`http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`);
    });
  });
}
