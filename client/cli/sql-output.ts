/** How `svc sql` and its shell print result sets (docs/cli.md "SQL"). */
import type { ResultSet } from '../results.ts';
import type { Cli } from './context.ts';

/** A result set as `--json` prints it: rows as objects keyed by column. */
export function resultJson(rs: ResultSet): Record<string, unknown> {
  return {
    columns: rs.columns,
    rows: rs.rows.map((row) => ({ ...row })),
    rows_affected: rs.rowsAffected,
    last_insert_rowid: rs.lastInsertRowid === undefined ? null : rs.lastInsertRowid.toString(),
    visible_csn: rs.visibleCsn,
  };
}

/** Prints a result set for people: a table of its rows, or what it changed. */
export function printResult(cli: Cli, rs: ResultSet): void {
  if (rs.columns.length > 0) {
    cli.out.table(rs.columns, rs.toArrays());
    cli.out.line(cli.out.c.dim(`(${rs.rows.length} row${rs.rows.length === 1 ? '' : 's'})`));
  } else {
    const id = rs.lastInsertRowid !== undefined ? `, last insert rowid ${rs.lastInsertRowid}` : '';
    cli.out.line(`OK, ${rs.rowsAffected} row${rs.rowsAffected === 1 ? '' : 's'} affected${id}`);
  }
}
