/**
 * `svc functions deploy|dev|list|get|versions|invoke|logs|rm` (docs/functions.md; docs/cli.md
 * "Functions"). `deploy` sends one ES module: a bundled `.js` as it is, a source (TypeScript, JSX)
 * bundled with its imports first (../functions/bundle.ts); `invoke` prints the function's answer
 * body on stdout (its status and headers with `--json`) and exits 1 when the status is 400 or more;
 * `logs --follow` polls until Ctrl-C.
 */
import { openAsBlob } from 'node:fs';
import { Readable } from 'node:stream';
import type { Command } from 'commander';
import { SvcError } from '../../errors.ts';
import { CliError, UsageError } from '../errors.ts';
import { readStdin } from '../input.ts';
import type { Registry } from '../program.ts';
import { jsonArg, projectArg, PROJECT_HELP } from './args.ts';
import { listOptions, printList, type ListOptions } from './lists.ts';
import { devCommand } from './functions-dev.ts';
import { bundleFunction, needsBundle } from '../functions/bundle.ts';
import { follow } from '../functions/follow.ts';
import type { InvokeInit } from '../../functions.ts';
import type { FunctionInfo } from '../../types.ts';
import type { Cli } from '../context.ts';

function whole(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError(`${name} must be a whole number (got ${JSON.stringify(value)})`);
  return Number(value);
}

/** The page `logs --follow` polls: the most the logs route answers. */
const FOLLOW_PAGE = 1000;

const row = (f: FunctionInfo) => [f.name, f.version, f.size, f.timeout_ms, f.memory_mb, f.max_concurrency, f.updated_at];
const head = ['name', 'version', 'bytes', 'timeout_ms', 'memory_mb', 'max_concurrency', 'updated_at'];

/** Registers the function commands. */
export function register(program: Command, r: Registry): void {
  const functions = program.command('functions').description("a project's functions: deploy, invoke, read their logs");
  deploy(functions, r);
  devCommand(functions, r);
  list(functions, r);
  get(functions, r);
  versions(functions, r);
  invoke(functions, r);
  logs(functions, r);
  rm(functions, r);
}

/** `svc functions deploy`: a module file as the function's new version. */
function deploy(functions: Command, r: Registry): void {
  functions
    .command('deploy')
    .description('deploy a module (export default { fetch(request, env, ctx) }) as the function\'s new version: TypeScript and npm imports are bundled first')
    .argument('<project>', PROJECT_HELP)
    .argument('<name>', 'the function name: a-z, 0-9 and -, starting with a letter')
    .argument('<file>', 'a source (.ts, .tsx, .jsx, …: bundled with its imports by esbuild), a bundled .js/.mjs (sent as it is), or "-" for stdin')
    .option('--bundle', 'bundle a .js/.mjs too (its imports included)')
    .option('--no-bundle', 'send the file as it is')
    .option('--timeout-ms <ms>', 'wall-clock limit of one invocation, 100 to 60000 (default 10000)')
    .option('--memory-mb <mib>', 'heap limit of each worker, 32 to 1024 (default 128)')
    .option('--max-concurrency <n>', 'invocations at once, 1 to 64 (default 8)')
    .action(
      r.action(async (cli, id: string, name: string, file: string, options: { bundle?: boolean; timeoutMs?: string; memoryMb?: string; maxConcurrency?: string }) => {
        cli.failure.project = projectArg(id);
        let module: Blob | string;
        const bundled = needsBundle(file, options.bundle);
        if (bundled) {
          const bundle = await bundleFunction(file, cli.cwd);
          module = bundle.code;
          cli.out.note(cli.out.ce.dim(`bundled ${file} and ${bundle.inputs.length - 1} more file${bundle.inputs.length === 2 ? '' : 's'} with esbuild: ${Buffer.byteLength(bundle.code)} bytes, its source map inside (stacks in the logs name the sources)`));
        } else {
          try {
            module = file === '-' ? await readStdin(cli.io.stdin) : await openAsBlob(file);
          } catch (err) {
            throw new CliError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
          }
        }
        const settings = {
          ...(options.timeoutMs !== undefined ? { timeoutMs: whole(options.timeoutMs, '--timeout-ms')! } : {}),
          ...(options.memoryMb !== undefined ? { memoryMb: whole(options.memoryMb, '--memory-mb')! } : {}),
          ...(options.maxConcurrency !== undefined ? { maxConcurrency: whole(options.maxConcurrency, '--max-concurrency')! } : {}),
        };
        const fn = await cli.withSession((c) => c.project(id).functions.deploy(name, module, settings)).catch((err: unknown) => {
          // A module sent as it is that imports a package or a file: bundling is the next step.
          if (err instanceof SvcError && err.status === 400 && /No such module/.test(err.message) && !bundled) {
            cli.out.note(cli.out.ce.yellow('the module imports what the service cannot load: bundle its imports with --bundle, or deploy its source file'));
          }
          throw err;
        });
        cli.out.result(fn, () => cli.out.line(`deployed ${fn.name} version ${fn.version} (${fn.size} bytes, sha256 ${fn.sha256.slice(0, 12)}…)`));
      }),
    );
}

/** `svc functions list`. */
function list(functions: Command, r: Registry): void {
  listOptions(functions.command('list').description("the project's functions").argument('<project>', PROJECT_HELP)).action(
    r.action(async (cli, id: string, options: ListOptions) => {
      cli.failure.project = projectArg(id);
      await printList(cli, options, (c, page) => c.project(id).functions.list(page), { field: 'functions', head, row, more: `svc functions list ${id}` });
    }),
  );
}

/** `svc functions get`. */
function get(functions: Command, r: Registry): void {
  functions
    .command('get')
    .description('one function and its current version')
    .argument('<project>', PROJECT_HELP)
    .argument('<name>', 'the function name')
    .action(
      r.action(async (cli, id: string, name: string) => {
        cli.failure.project = projectArg(id);
        const fn = await cli.withSession((c) => c.project(id).functions.get(name));
        cli.out.result(fn, () => cli.out.fields({ ...fn }));
      }),
    );
}

/** `svc functions versions`: newest first. */
function versions(functions: Command, r: Registry): void {
  listOptions(
    functions.command('versions').description("a function's deployed versions, newest first").argument('<project>', PROJECT_HELP).argument('<name>', 'the function name'),
  ).action(
    r.action(async (cli, id: string, name: string, options: ListOptions) => {
      cli.failure.project = projectArg(id);
      await printList(cli, options, (c, page) => c.project(id).functions.versions(name, page), {
        field: 'versions',
        head: ['version', 'bytes', 'sha256', 'created_at'],
        row: (v) => [v.version, v.size, v.sha256.slice(0, 16), v.created_at],
        more: `svc functions versions ${id} ${name}`,
      });
    }),
  );
}

/** `svc functions invoke`: the function's answer on stdout (status and headers with `--json`); exits 1 from 400 on. */
function invoke(functions: Command, r: Registry): void {
  functions
    .command('invoke')
    .description('call the function (with SVC_KEY, as that project key) and print its answer')
    .argument('<project>', PROJECT_HELP)
    .argument('<name>', 'the function name')
    .argument('[path]', 'the path after /invoke, such as /users/7', '')
    .option('-X, --method <method>', 'the HTTP method (default GET, POST with --data)')
    .option('-d, --data <body>', 'the request body ("-" reads stdin)')
    .option('-H, --header <header...>', 'request headers as "Name: value"')
    .action(
      r.action(async (cli, id: string, name: string, path: string, options: { method?: string; data?: string; header?: string[] }) => {
        cli.failure.project = projectArg(id);
        const init = await invokeInit(cli, path, options);
        const response = cli.env.SVC_KEY
          ? await (await cli.dataClient(id)).client.project(id).functions.invoke(name, init)
          : await cli.withSession((c) => c.project(id).functions.invoke(name, init));
        await printAnswer(cli, response);
        return response.status >= 400 ? 1 : 0;
      }),
    );
}

/** What `invoke` sends: `path` may carry a query; headers come as "Name: value". */
async function invokeInit(cli: Cli, path: string, options: { method?: string; data?: string; header?: string[] }): Promise<InvokeInit> {
  const headers: Record<string, string> = {};
  for (const h of options.header ?? []) {
    const colon = h.indexOf(':');
    if (colon < 1) throw new UsageError(`--header must be "Name: value" (got ${JSON.stringify(h)})`);
    headers[h.slice(0, colon).trim()] = h.slice(colon + 1).trim();
  }
  const [pathname = '', search = ''] = path.split('?', 2);
  const body = options.data === '-' ? await readStdin(cli.io.stdin) : options.data;
  return {
    ...(options.method ? { method: options.method } : {}),
    path: pathname,
    ...(search ? { query: Object.fromEntries(new URLSearchParams(search)) } : {}),
    headers,
    ...(body === undefined ? {} : { body }),
  };
}

/** The function's answer: its body on stdout, or with `--json` its status, headers and body. */
async function printAnswer(cli: Cli, response: Response): Promise<void> {
  if (cli.out.json) {
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = jsonArg(text, 'the answer');
    } catch {
      // Not JSON: printed as a string.
    }
    cli.out.result({ status: response.status, headers: Object.fromEntries(response.headers), body: parsed }, () => {});
  } else if (response.body) {
    const { pipeline } = await import('node:stream/promises');
    await pipeline(Readable.fromWeb(response.body as import('node:stream/web').ReadableStream<Uint8Array>), cli.io.stdout as NodeJS.WritableStream, { end: false });
    if (response.status >= 400) cli.out.note(cli.out.ce.red(`the function answered ${response.status}`));
  }
}

/** `svc functions logs`. */
function logs(functions: Command, r: Registry): void {
  functions
    .command('logs')
    .description("the last lines of the function's console, secrets redacted")
    .argument('<project>', PROJECT_HELP)
    .argument('<name>', 'the function name')
    .option('--tail <n>', 'lines, 1 to 1000 (default 100)')
    .option('-f, --follow', 'keep printing new lines until Ctrl-C (polls every second; with --json one JSON string per line)')
    .action(
      r.action(async (cli, id: string, name: string, options: { tail?: string; follow?: boolean }) => {
        cli.failure.project = projectArg(id);
        const tail = whole(options.tail, '--tail');
        if (!options.follow) {
          const logs = await cli.withSession((c) => c.project(id).functions.logs(name, tail === undefined ? {} : { tail }));
          cli.out.result(logs, () => {
            for (const line of logs.lines) cli.out.line(line);
          });
          return;
        }
        await followLogs(cli, id, name, tail);
      }),
    );
}

/** Prints the last lines, then each new one until Ctrl-C (or SIGTERM), which ends cleanly (exit 0). */
async function followLogs(cli: Cli, id: string, name: string, tail: number | undefined): Promise<void> {
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let first = true;
  try {
    await follow(
      async () => {
        // Always a full page, so that answers line up and no line is missed between polls.
        const logs = await cli.withSession((c) => c.project(id).functions.logs(name, { tail: FOLLOW_PAGE, signal: stop.signal }));
        if (first) cli.out.note(cli.out.ce.dim(`following the logs of ${name} (Ctrl-C to stop)`));
        first = false;
        return logs.lines;
      },
      (line) => cli.io.stdout.write(cli.out.json ? `${JSON.stringify(line)}\n` : `${line}\n`),
      stop.signal,
      { firstTail: tail ?? 100 },
    );
  } catch (err) {
    if (!stop.signal.aborted) throw err;
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}

/** `svc functions rm`. */
function rm(functions: Command, r: Registry): void {
  functions
    .command('rm')
    .description('delete the function (invocations in flight finish)')
    .argument('<project>', PROJECT_HELP)
    .argument('<name>', 'the function name')
    .action(
      r.action(async (cli, id: string, name: string) => {
        cli.failure.project = projectArg(id);
        const fn = await cli.withSession((c) => c.project(id).functions.delete(name));
        cli.out.result(fn, () => cli.out.line(`deleted ${fn.name}`));
      }),
    );
}
