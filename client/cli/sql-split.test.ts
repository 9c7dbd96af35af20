/** Where statements end, by sqlite3_complete's rule (client/cli/sql-split.ts). */
import { describe, expect, it } from 'vitest';
import { isBlankSql, splitStatements } from './sql-split.ts';

describe('splitStatements', () => {
  it('ends a statement at a semicolon outside strings, names and comments', () => {
    expect(splitStatements("SELECT 'a;b', \"c;d\", [e;f], `g;h`; SELECT 2;")).toEqual({
      statements: ["SELECT 'a;b', \"c;d\", [e;f], `g;h`", 'SELECT 2'],
      rest: '',
    });
    expect(splitStatements("SELECT 'it''s'; -- a comment; still\nSELECT /* ; */ 3;").statements).toEqual([
      "SELECT 'it''s'",
      '-- a comment; still\nSELECT /* ; */ 3',
    ]);
  });

  it('keeps what is not complete yet as the rest', () => {
    expect(splitStatements('SELECT 1; SELECT')).toEqual({ statements: ['SELECT 1'], rest: ' SELECT' });
    expect(splitStatements("SELECT 'open;").statements).toEqual([]);
    expect(splitStatements('SELECT 1 /* open ;').statements).toEqual([]);
  });

  it('keeps a trigger body whole until END;', () => {
    const trigger = 'CREATE TRIGGER t AFTER INSERT ON a BEGIN INSERT INTO b VALUES (1); UPDATE c SET x = 1; END';
    expect(splitStatements(`${trigger}; SELECT 1;`).statements).toEqual([trigger, 'SELECT 1']);
    expect(splitStatements('CREATE TEMP TRIGGER t AFTER INSERT ON a BEGIN SELECT 1;').rest).toContain('BEGIN SELECT 1;');
  });

  it('drops empty statements', () => {
    expect(splitStatements(' ; ;SELECT 1;;').statements).toEqual(['SELECT 1']);
  });

  it('tells blank text from SQL', () => {
    expect(isBlankSql('  -- nothing\n /* here */ ')).toBe(true);
    expect(isBlankSql('SELECT 1')).toBe(false);
  });
});
