// The SQL editor's statement splitter (console/sql-split.ts; docs/console.md "SQL editor").
import { describe, expect, it } from 'vitest';
import { splitStatements } from './sql-split.ts';

describe('splitStatements', () => {
  it('splits on semicolons and drops empty statements', () => {
    expect(splitStatements('CREATE TABLE t (a); INSERT INTO t VALUES (1);;\n  SELECT * FROM t')).toEqual([
      'CREATE TABLE t (a)',
      'INSERT INTO t VALUES (1)',
      'SELECT * FROM t',
    ]);
  });

  it('keeps semicolons inside strings, quoted identifiers and comments', () => {
    expect(splitStatements(`INSERT INTO t VALUES ('a;b', 'it''s;'); SELECT "x;y", [p;q], \`r;s\` FROM t -- c;d\n; /* e;f */ SELECT 1`)).toEqual([
      "INSERT INTO t VALUES ('a;b', 'it''s;')",
      'SELECT "x;y", [p;q], `r;s` FROM t -- c;d',
      '/* e;f */ SELECT 1',
    ]);
  });

  it('keeps a trigger body, CASE … END included, in one statement', () => {
    const trigger = 'CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET a = CASE WHEN a > 1 THEN 0 ELSE a END; INSERT INTO log VALUES (1); END';
    expect(splitStatements(`${trigger}; SELECT 2;`)).toEqual([trigger, 'SELECT 2']);
  });

  it('drops a script of comments and blanks', () => {
    expect(splitStatements('  -- nothing\n /* here */ ; ')).toEqual([]);
  });

  it('does not take a column named trigger for a trigger', () => {
    expect(splitStatements('SELECT trigger FROM t; SELECT 1')).toEqual(['SELECT trigger FROM t', 'SELECT 1']);
  });
});
