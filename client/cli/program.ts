/**
 * The `svc` command line (docs/cli.md): commander parses, each command group registers itself from
 * client/cli/commands/, every action runs through `action()` so that output, errors and exit codes
 * are handled in one place: 0 success, 1 a service error (its code and the next step printed) or a
 * local failure, 2 a usage mistake.
 */
import { Command, CommanderError, Option } from 'commander';
import pkg from '../../package.json' with { type: 'json' };
import * as accounts from './commands/accounts.ts';
import * as archive from './commands/archive.ts';
import * as completion from './commands/completion.ts';
import * as functions from './commands/functions.ts';
import * as keys from './commands/keys.ts';
import * as lifecycle from './commands/lifecycle.ts';
import * as link from './commands/link.ts';
import * as projects from './commands/projects.ts';
import * as realtime from './commands/realtime.ts';
import * as secrets from './commands/secrets.ts';
import * as sql from './commands/sql.ts';
import * as storage from './commands/storage.ts';
import { Cli, type Io } from './context.ts';
import { report, UsageError } from './errors.ts';
import { Output } from './output.ts';
import { findLink, placeOperands, shapeOf, takesProject, type ProjectLink } from './project-ref.ts';

/** What a command group gets to register its commands. */
export interface Registry {
  /**
   * Wraps a command's work: builds the context from the global options, prints failures, sets the
   * exit code (the work may answer one of its own: 1 for `health` when degraded).
   */
  action<A extends unknown[]>(work: (cli: Cli, ...args: A) => Promise<void | number>): (...args: unknown[]) => Promise<void>;
}

/** Command groups, in the order `svc --help` lists them. */
const GROUPS = [accounts, link, projects, lifecycle, archive, keys, sql, storage, realtime, secrets, functions, completion];

/** The link of the working directory; a broken one is reported when the command uses it. */
function linkHere(): ProjectLink | null {
  try {
    return findLink(process.cwd())?.link ?? null;
  } catch {
    return null;
  }
}

/** Runs the CLI over `argv` (without `node` and the script); answers the exit code. */
export async function run(argv: string[], io: Io, env: NodeJS.ProcessEnv): Promise<number> {
  let exitCode = 0;
  const program = new Command('svc');
  program
    .description('svc-cloud from the command line: projects, their engines, keys, SQL, storage, realtime, secrets and functions')
    .version(pkg.version, '-v, --version')
    .addOption(new Option('--json', 'print machine-readable JSON on stdout and nothing else there'))
    .addOption(new Option('--profile <name>', 'the stored profile to use (default: $SVC_PROFILE or "default")'))
    .addOption(new Option('-p, --project <project>', 'the project (a name or an id) of commands that take one (default: $SVC_PROJECT, else the linked one: `svc link`)'))
    .showHelpAfterError('(add --help for usage)')
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    .exitOverride();

  const registry: Registry = {
    action(work) {
      return async (...args: unknown[]) => {
        const command = args[args.length - 1] as Command;
        const globals = command.optsWithGlobals<{ json?: boolean; profile?: string; project?: string }>();
        const out = new Output({ json: !!globals.json, out: io.stdout, err: io.stderr, env });
        const cli = new Cli({ out, env, io, profile: globals.profile, project: globals.project });
        try {
          const values = args.slice(0, -1);
          // PROJECT (a name, an id, or none for the linked one) becomes the project's id.
          if (shapeOf(command)) values[0] = await cli.resolveProject(values[0] as string | undefined);
          exitCode = (await work(cli, ...(values as never))) ?? 0;
        } catch (err) {
          exitCode = report(err, out, cli.failure);
        }
      };
    },
  };
  for (const group of GROUPS) group.register(program, registry);
  // Every command whose first argument is `project` takes a name, an id, or none (the linked one).
  const projects = (c: Command): void => {
    if (c.registeredArguments[0]?.name() === 'project') takesProject(c);
    c.commands.forEach(projects);
  };
  projects(program);
  // Which operand is PROJECT is decided by count before the action (project-ref.ts `projectFirst`).
  program.hook('preAction', (_, command) => {
    const shape = shapeOf(command);
    if (!shape) return;
    const explicit = command.optsWithGlobals<{ project?: string }>().project !== undefined || !!env.SVC_PROJECT;
    command.processedArgs = placeOperands(command, shape, command.args, explicit, shape.required < command.args.length ? linkHere() : null);
  });
  // Every command, at every depth, refuses what it does not know and says so (exit 2).
  const strict = (c: Command): void => {
    c.exitOverride().configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) }).showHelpAfterError('(add --help for usage)');
    c.commands.forEach(strict);
  };
  program.commands.forEach(strict);

  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here too, successfully.
      return err.exitCode === 0 ? 0 : 2;
    }
    if (err instanceof UsageError) {
      io.stderr.write(`error: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  return exitCode;
}
