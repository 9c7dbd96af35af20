/**
 * Entry point of the reference engine 3.0.0 (`bin/svc-engine`). Every command prints exactly one JSON
 * document on stdout; a failure prints `{"error":{"code","message"}}` and exits with the code of its
 * class (exit-codes.ts, docs/engine.md). `serve` prints its ready line as its one document.
 */
import { writeSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { spawnExecutor } from './executor-spawn.ts';
import { EXIT_CODES, EngineCliError } from './exit-codes.ts';

const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/** The statement time limit when `--statement-timeout-ms` is not given (Cloudflare D1 allows 30 s). */
const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;
const DRAIN_MS = 5000;
const USAGE = `usage:
  svc-engine version --json
  svc-engine init    --data-dir D --json
  svc-engine serve   --data-dir D --listen 127.0.0.1:P [--max-body-bytes N] [--statement-timeout-ms N]
  svc-engine status  --data-dir D --json
  svc-engine backup  --data-dir D --out B --json
  svc-engine verify  --backup B --json
  svc-engine restore --backup B --target T --json`;

/** The options each command takes, all strings except the accepted-and-ignored `--json`. */
const COMMAND_OPTIONS: Record<string, readonly string[]> = {
  version: [],
  init: ['data-dir'],
  serve: ['data-dir', 'listen', 'max-body-bytes', 'statement-timeout-ms'],
  status: ['data-dir'],
  backup: ['data-dir', 'out'],
  verify: ['backup'],
  restore: ['backup', 'target'],
};
const OPTIONAL = new Set(['max-body-bytes', 'statement-timeout-ms']);

function badArguments(message: string): EngineCliError {
  return new EngineCliError('bad_arguments', message);
}

/** Parses `argv` (after the node and script paths) into a command and its string options. */
function parseCommand(argv: string[]): { command: string; values: Record<string, string> } {
  const [command, ...rest] = argv;
  if (command === undefined || !(command in COMMAND_OPTIONS)) {
    throw badArguments(command === undefined ? 'no command given' : `unknown command ${command}`);
  }
  const names = COMMAND_OPTIONS[command] as readonly string[];
  const options: Record<string, { type: 'string' | 'boolean' }> = { json: { type: 'boolean' } };
  for (const name of names) options[name] = { type: 'string' };
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options, strict: true, allowPositionals: false });
  } catch (err) {
    throw badArguments(`${command}: ${(err as Error).message}`);
  }
  const values: Record<string, string> = {};
  for (const name of names) {
    const value = (parsed.values as Record<string, unknown>)[name];
    if (value === undefined) {
      if (!OPTIONAL.has(name)) throw badArguments(`${command}: --${name} is required`);
      continue;
    }
    if (typeof value !== 'string' || value === '') throw badArguments(`${command}: --${name} needs a non-empty value`);
    values[name] = value;
  }
  return { command, values };
}

/** Parses `--listen host:port`: a loopback address only, since /v2 has no authentication of its own. */
function parseListen(value: string): { host: string; port: number } {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):([0-9]{1,5})$/.exec(value);
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65535) throw badArguments(`--listen must be host:port (got ${value})`);
  const host = (match[1] ?? match[2]) as string;
  const loopback = host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
  if (!loopback) throw badArguments(`--listen must be a loopback address: the engine's /v2 listener has no authentication (got ${host})`);
  return { host, port };
}

function parseByteLimit(value: string | undefined): number {
  if (value === undefined) return DEFAULT_MAX_BODY_BYTES;
  const n = /^[0-9]{1,12}$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw badArguments(`--max-body-bytes must be a positive integer (got ${value})`);
  return n;
}

function parseStatementTimeout(value: string | undefined): number {
  if (value === undefined) return DEFAULT_STATEMENT_TIMEOUT_MS;
  const n = /^[0-9]{1,9}$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < 1 || n > 86_400_000) throw badArguments(`--statement-timeout-ms must be an integer from 1 to 86400000 (got ${value})`);
  return n;
}

async function run(argv: string[]): Promise<number> {
  const { command, values } = parseCommand(argv);
  const v = (name: string) => values[name] as string;
  let output: Record<string, unknown>;
  // Each command loads only its own modules (a start of serve is on every wakeup's path).
  switch (command) {
    case 'version':
      output = (await import('./commands.ts')).versionCommand();
      break;
    case 'init':
      output = (await import('./commands.ts')).initCommand(v('data-dir'));
      break;
    case 'status':
      output = (await import('./commands.ts')).statusCommand(v('data-dir'));
      break;
    case 'backup':
      output = (await import('./backup.ts')).backupCommand(v('data-dir'), v('out'));
      break;
    case 'verify':
      output = (await import('./backup.ts')).verifyCommand(v('backup'));
      break;
    case 'restore':
      output = (await import('./backup.ts')).restoreCommand(v('backup'), v('target'));
      break;
    case 'serve': {
      const listen = parseListen(v('listen'));
      const maxBodyBytes = parseByteLimit(values['max-body-bytes']);
      const statementTimeoutMs = parseStatementTimeout(values['statement-timeout-ms']);
      // The executor process boots while this one loads serve's modules and takes the lock; it opens
      // the database only when told to (docs/engine.md "Statement time limit").
      const executor = spawnExecutor(v('data-dir'));
      const { serveCommand } = await import('./serve.ts');
      return serveCommand({ dataDir: v('data-dir'), ...listen, maxBodyBytes, statementTimeoutMs, drainMs: DRAIN_MS, executor });
    }
    default:
      throw badArguments(`unknown command ${command}`);
  }
  writeSync(1, `${JSON.stringify(output)}\n`);
  return EXIT_CODES.ok;
}

function fail(err: unknown): number {
  if (err instanceof EngineCliError) {
    if (err.code === 'bad_arguments') process.stderr.write(`${USAGE}\n`);
    writeSync(1, `${JSON.stringify({ error: { code: err.code, message: err.message } })}\n`);
    return err.exitCode;
  }
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`svc-engine: ${err instanceof Error ? (err.stack ?? message) : message}\n`);
  writeSync(1, `${JSON.stringify({ error: { code: 'internal', message } })}\n`);
  return EXIT_CODES.internal;
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => process.exit(fail(err)),
);
