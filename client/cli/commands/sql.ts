/**
 * `svc sql PROJECT [STATEMENT]` (docs/cli.md "SQL"): one statement, a script piped on stdin (run as
 * one transaction), or, on a terminal with no statement, the interactive shell. The data plane takes
 * a project key: `SVC_KEY`, or one the CLI issues for itself and keeps in the profile.
 */
import type { Command } from 'commander';
import type { SvcClient } from '../../client.ts';
import { SvcError } from '../../errors.ts';
import type { InArgs } from '../../results.ts';
import type { Cli } from '../context.ts';
import { UsageError } from '../errors.ts';
import { readStdin } from '../input.ts';
import type { Registry } from '../program.ts';
import { runShell } from '../shell.ts';
import { printResult, resultJson } from '../sql-output.ts';
import { isBlankSql, splitStatements } from '../sql-split.ts';
import { groupTransactions } from '../sql-transaction.ts';
import { jsonArg, projectArg, PROJECT_HELP } from './args.ts';

/**
 * Runs `work` with the project's data-plane client; a key the CLI stored earlier that the service
 * now refuses (revoked) is replaced by a fresh one, once.
 */
export async function withDataClient<T>(cli: Cli, projectId: string, work: (client: SvcClient) => Promise<T>): Promise<T> {
  const first = await cli.dataClient(projectId);
  try {
    return await work(first.client);
  } catch (err) {
    const refused = err instanceof SvcError && err.status === 401 && err.source === 'service';
    if (!refused || first.fromEnv || first.minted) throw err;
    cli.out.note(cli.out.ce.dim('the stored project key was refused (revoked?): issuing a new one'));
    return work((await cli.dataClient(projectId, { fresh: true })).client);
  }
}

/**
 * The statements a script sends. A script runs as one transaction already, so its `BEGIN` and
 * `COMMIT` (as `sqlite3 .dump` writes them) are dropped, and what a `ROLLBACK` ends is not sent
 * (docs/cli.md "Transactions").
 */
function scriptStatements(statements: string[]): string[] {
  try {
    return groupTransactions(statements).flatMap((u) => (u.kind === 'batch' ? u.statements : [u.sql]));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** Registers `svc sql`. */
export function register(program: Command, r: Registry): void {
  program
    .command('sql')
    .description('run SQL on the project (POST /v2/sql): a statement, a script on stdin, or an interactive shell')
    .argument('<project>', PROJECT_HELP)
    .argument('[statement]', 'the SQL to run; several statements separated by ";" run as one transaction')
    .option('--params <json>', 'arguments of a single statement: a JSON array (?) or object (:name)')
    .action(
      r.action(async (cli, id: string, statement: string | undefined, options: { params?: string }) => {
        cli.failure.project = projectArg(id);
        const params = options.params === undefined ? undefined : jsonArg(options.params, '--params');
        if (params !== undefined && (typeof params !== 'object' || params === null)) throw new UsageError('--params must be a JSON array or object');
        if (statement === undefined && cli.io.stdin.isTTY && !cli.out.json) {
          await withDataClient(cli, id, (client) => runShell(cli, client, id));
          return;
        }
        const text = statement ?? (await readStdin(cli.io.stdin));
        const split = splitStatements(text);
        if (!isBlankSql(split.rest)) split.statements.push(split.rest.trim());
        const statements = scriptStatements(split.statements);
        if (statements.length === 0) throw new UsageError('no SQL to run (give a statement, or pipe a script on stdin)');
        if (params !== undefined && statements.length > 1) throw new UsageError('--params goes with a single statement');
        const results = await withDataClient(cli, id, (client) =>
          statements.length === 1 ? client.sql(statements[0]!, params as InArgs | undefined).then((rs) => [rs]) : client.batch(statements),
        );
        cli.out.result(results.length === 1 ? resultJson(results[0]!) : { results: results.map(resultJson) }, () => {
          for (const rs of results) printResult(cli, rs);
        });
      }),
    );
}
