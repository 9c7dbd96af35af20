/**
 * `BEGIN; …; COMMIT;` in the SQL shell and in scripts (docs/cli.md "Transactions"). The data plane
 * runs one statement per request and a batch in one transaction (docs/engine.md "POST /v2/batch"),
 * never a transaction held open across requests; so what is typed between `BEGIN` and `COMMIT`
 * is kept here and sent as one batch at `COMMIT` — all of it applies or none — and `ROLLBACK`
 * discards it without sending anything.
 */

/** What a statement does to a transaction, or null for an ordinary statement. */
export type TransactionControl = 'begin' | 'commit' | 'rollback' | 'savepoint';

/** Comments and whitespace at the start of a statement. */
const LEADING = /^(?:\s+|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*/;

/**
 * `BEGIN [DEFERRED|IMMEDIATE|EXCLUSIVE] [TRANSACTION]`, `COMMIT`/`END [TRANSACTION]`,
 * `ROLLBACK [TRANSACTION]` (SQLite's grammar); `SAVEPOINT`, `RELEASE` and `ROLLBACK TO` are
 * `savepoint` (not supported inside a kept transaction).
 */
export function transactionControl(statement: string): TransactionControl | null {
  const words = statement.replace(LEADING, '').replace(/;\s*$/, '').trim().split(/\s+/).map((w) => w.toUpperCase());
  const [first, second, third] = words;
  const only = (allowed: number) => words.length <= allowed;
  if (first === 'BEGIN') {
    const mode = second === 'DEFERRED' || second === 'IMMEDIATE' || second === 'EXCLUSIVE';
    const rest = mode ? third : second;
    if ((rest === undefined || rest === 'TRANSACTION') && only(mode ? 3 : 2)) return 'begin';
    return null;
  }
  if ((first === 'COMMIT' || first === 'END') && (second === undefined || second === 'TRANSACTION') && only(2)) return 'commit';
  if (first === 'ROLLBACK') {
    const to = second === 'TO' || third === 'TO';
    if (to) return 'savepoint';
    if ((second === undefined || second === 'TRANSACTION') && only(2)) return 'rollback';
    return null;
  }
  if (first === 'SAVEPOINT' || first === 'RELEASE') return 'savepoint';
  return null;
}

/** A unit to send: one statement, or a transaction's statements as one batch. */
export type Unit = { kind: 'statement'; sql: string } | { kind: 'batch'; statements: string[] };

/**
 * The statements of a script grouped as they will be sent: `BEGIN … COMMIT` becomes one batch,
 * `BEGIN … ROLLBACK` nothing. A transaction left open at the end, a `COMMIT` or `ROLLBACK` without
 * `BEGIN`, a nested `BEGIN` or a savepoint is refused with the reason.
 */
export function groupTransactions(statements: readonly string[]): Unit[] {
  const units: Unit[] = [];
  let open: string[] | null = null;
  for (const sql of statements) {
    const control = transactionControl(sql);
    if (control === 'savepoint') throw new Error(`savepoints are not supported (a transaction is sent as one batch): ${sql}`);
    if (control === 'begin') {
      if (open) throw new Error('BEGIN inside a transaction: transactions do not nest');
      open = [];
    } else if (control === 'commit' || control === 'rollback') {
      if (!open) throw new Error(`${sql.trim().split(/\s+/)[0]!.toUpperCase()} without BEGIN`);
      if (control === 'commit' && open.length > 0) units.push({ kind: 'batch', statements: open });
      open = null;
    } else if (open) open.push(sql);
    else units.push({ kind: 'statement', sql });
  }
  if (open) throw new Error('BEGIN without COMMIT: the transaction was not sent (end it with COMMIT, or ROLLBACK)');
  return units;
}
