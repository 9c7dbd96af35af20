/**
 * The interactive SQL shell of `svc sql PROJECT` (docs/cli.md "The shell"): node:readline with
 * history kept across sessions (`sql_history` in the configuration directory, mode 0600), statements
 * that run once complete (a `;` by SQLite's rule, so they may span lines), results as tables, errors
 * printed without leaving the shell, and a few dot commands.
 */
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import type { SvcClient } from '../client.ts';
import { SvcError } from '../errors.ts';
import type { Cli } from './context.ts';
import { hintFor } from './errors.ts';
import { printResult } from './sql-output.ts';
import { isBlankSql, splitStatements } from './sql-split.ts';
import { transactionControl } from './sql-transaction.ts';

/** Lines of history kept. */
const HISTORY_SIZE = 1000;

const HELP = `Statements end with ";" and may span lines. BEGIN; …; COMMIT; sends what is between as one
atomic batch at COMMIT (nothing runs before); ROLLBACK discards it. Commands:
  .tables           list the tables
  .schema [TABLE]   show CREATE statements
  .help             this help
  .quit             leave (or Ctrl-D); Ctrl-C clears the statement being typed`;

/** Runs the shell until the user leaves. */
export async function runShell(cli: Cli, client: SvcClient, projectId: string): Promise<void> {
  const historyFile = join(cli.dir, 'sql_history');
  const history = readHistory(historyFile);
  const rl = createInterface({
    input: cli.io.stdin,
    output: cli.io.stdout,
    terminal: true,
    history,
    historySize: HISTORY_SIZE,
    removeHistoryDuplicates: true,
  });
  const c = cli.out.c;
  const prompts = { first: c.bold('svc> '), more: c.dim('...> '), txn: c.bold(c.yellow('txn> ')) };
  cli.out.line(`Connected to ${projectId} on ${client.baseUrl}. ${c.dim('.help for help, .quit to leave')}`);
  rl.setPrompt(prompts.first);
  rl.prompt();
  await serve(cli, rl, prompts, shellWork(cli, client, projectId));
  writeHistory(historyFile, (rl as unknown as { history: string[] }).history ?? []);
  cli.out.line();
}

/** What the shell's lines do: run a statement, or a dot command (false: leave). */
interface ShellWork {
  run(sql: string): Promise<void>;
  dot(line: string): Promise<boolean>;
  /** Whether a BEGIN is open (its statements kept for COMMIT). */
  inTransaction(): boolean;
  /** The shell closes: an open transaction is dropped, and said so. */
  end(): void;
}

/** Statements run with the client's project key; an error is printed and the shell goes on. */
function shellWork(cli: Cli, client: SvcClient, projectId: string): ShellWork {
  const execute = async (sql: string): Promise<void> => {
    try {
      printResult(cli, await client.sql(sql));
    } catch (err) {
      printError(cli, err, projectId);
    }
  };
  const txn = transactions(cli, client, projectId);
  const run = (sql: string): Promise<void> => txn.take(sql) ?? execute(sql);
  const runSchema = async (table: string | undefined): Promise<void> => {
    try {
      const rs = await client.sql(
        `SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE '\\_svc\\_%' ESCAPE '\\'${table ? ' AND tbl_name = ?' : ''} ORDER BY name`,
        table ? [table] : [],
      );
      for (const row of rs.rows) cli.out.line(`${String(row.sql)};`);
    } catch (err) {
      printError(cli, err, projectId);
    }
  };
  const dot = async (line: string): Promise<boolean> => {
    const [command, arg] = line.trim().split(/\s+/, 2);
    switch (command) {
      case '.quit':
      case '.exit':
        return false;
      case '.help':
        cli.out.line(HELP);
        return true;
      case '.tables':
        await run("SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '\\_svc\\_%' ESCAPE '\\' ORDER BY name");
        return true;
      case '.schema':
        await runSchema(arg);
        return true;
      default:
        cli.out.line(`unknown command ${command}: .help lists them`);
        return true;
    }
  };
  return { run, dot, inTransaction: () => txn.open(), end: () => txn.end() };
}

/**
 * BEGIN … COMMIT at the prompt (docs/cli.md "Transactions"): the statements between are kept and
 * sent as one batch — one transaction on the engine — at COMMIT; ROLLBACK drops them unsent.
 */
function transactions(cli: Cli, client: SvcClient, projectId: string) {
  let kept: string[] | null = null;
  const c = cli.out.c;
  const plural = (n: number) => `${n} statement${n === 1 ? '' : 's'}`;
  const commit = async (statements: string[]): Promise<void> => {
    if (statements.length === 0) return cli.out.line('COMMIT: the transaction was empty, nothing sent');
    try {
      const results = await client.batch(statements);
      for (const rs of results) printResult(cli, rs);
      cli.out.line(c.green(`COMMIT: ${plural(statements.length)} applied as one transaction (one atomic batch)`));
    } catch (err) {
      printError(cli, err, projectId);
      cli.out.line(c.red(`the transaction was not applied: none of its ${plural(statements.length)} took effect`));
    }
  };
  /** Handles `sql` when it is a transaction's (control or kept); undefined when it is to run now. */
  const take = (sql: string): Promise<void> | undefined => {
    const control = transactionControl(sql);
    if (control === null && kept === null) return undefined;
    if (control === null) {
      kept!.push(sql);
      cli.out.line(c.dim(`(kept for COMMIT: ${plural(kept!.length)})`));
    } else if (control === 'savepoint') {
      cli.out.note(`${cli.out.ce.red('error:')} savepoints are not supported: a transaction is sent as one batch at COMMIT`);
    } else if (control === 'begin') {
      if (kept) cli.out.note(`${cli.out.ce.red('error:')} a transaction is already open (${plural(kept.length)} kept): COMMIT or ROLLBACK it first`);
      else {
        kept = [];
        cli.out.line(c.dim('BEGIN: statements are kept and sent as one atomic batch at COMMIT (nothing runs until then); ROLLBACK discards them'));
      }
    } else if (kept === null) {
      cli.out.note(`${cli.out.ce.red('error:')} no transaction is open (BEGIN starts one)`);
    } else {
      const statements = kept;
      kept = null;
      if (control === 'commit') return commit(statements);
      cli.out.line(`ROLLBACK: ${plural(statements.length)} discarded, nothing was sent`);
    }
    return Promise.resolve();
  };
  const end = () => {
    if (kept && kept.length > 0) cli.out.note(`the open transaction was discarded: ${plural(kept.length)} not sent`);
    kept = null;
  };
  return { take, open: () => kept !== null, end };
}

/**
 * Handles the lines one at a time, in order, even while a statement is running; a statement runs
 * once complete. Settles when the shell closes and the last line is done.
 */
function serve(cli: Cli, rl: Interface, prompts: { first: string; more: string; txn: string }, work: ShellWork): Promise<void> {
  let buffer = '';
  let queue = Promise.resolve(true);
  return new Promise<void>((resolve) => {
    // Ctrl-C drops what is being typed; on an empty prompt it says how to leave, and a second one
    // in a row leaves (as Node's REPL does).
    let interrupted = false;
    rl.on('SIGINT', () => {
      const typing = buffer !== '' || rl.line !== '';
      if (!typing && interrupted) return rl.close();
      interrupted = !typing;
      buffer = '';
      Object.assign(rl as unknown as { line: string; cursor: number }, { line: '', cursor: 0 });
      cli.io.stdout.write(typing ? '^C\n' : '\n(press Ctrl-C again, Ctrl-D or type .quit to leave)\n');
      rl.setPrompt(work.inTransaction() ? prompts.txn : prompts.first);
      rl.prompt();
    });
    rl.on('close', () => {
      void queue.then(() => {
        work.end();
        resolve();
      });
    });
    rl.on('line', (line) => {
      interrupted = false;
      queue = queue.then(async (open) => {
        if (!open) return false;
        if (!buffer && line.trim().startsWith('.')) {
          const keepOpen = await work.dot(line);
          if (!keepOpen) {
            rl.close();
            return false;
          }
        } else {
          buffer += (buffer ? '\n' : '') + line;
          const { statements, rest } = splitStatements(buffer);
          buffer = isBlankSql(rest) ? '' : rest;
          for (const statement of statements) await work.run(statement);
        }
        rl.setPrompt(buffer ? prompts.more : work.inTransaction() ? prompts.txn : prompts.first);
        rl.prompt();
        return true;
      });
    });
  });
}

function printError(cli: Cli, err: unknown, projectId: string): void {
  const e = cli.out.ce;
  if (err instanceof SvcError) {
    cli.out.note(`${e.red('error:')} ${e.bold(err.code)}: ${err.message}`);
    const hint = hintFor(err, { project: projectId, usedKey: true });
    if (hint) cli.out.note(`${e.yellow('hint:')} ${hint}`);
    return;
  }
  cli.out.note(`${e.red('error:')} ${err instanceof Error ? err.message : String(err)}`);
}

/** History as readline keeps it: newest first. */
function readHistory(file: string): string[] {
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean).reverse().slice(0, HISTORY_SIZE);
  } catch {
    return [];
  }
}

function writeHistory(file: string, newestFirst: string[]): void {
  try {
    mkdirSync(join(file, '..'), { recursive: true, mode: 0o700 });
    writeFileSync(file, `${[...newestFirst].slice(0, HISTORY_SIZE).reverse().join('\n')}\n`, { mode: 0o600 });
  } catch {
    // History is a convenience: a read-only configuration directory does not stop the shell.
  }
}
