/** BEGIN … COMMIT as one batch (client/cli/sql-transaction.ts). */
import { describe, expect, it } from 'vitest';
import { groupTransactions, transactionControl } from './sql-transaction.ts';

describe('transactionControl', () => {
  it("knows SQLite's transaction statements and nothing else", () => {
    for (const s of ['BEGIN', 'begin transaction', 'BEGIN IMMEDIATE', 'begin exclusive transaction', '-- c\n BEGIN']) expect(transactionControl(s)).toBe('begin');
    for (const s of ['COMMIT', 'commit transaction', 'END', 'end transaction']) expect(transactionControl(s)).toBe('commit');
    for (const s of ['ROLLBACK', 'rollback transaction']) expect(transactionControl(s)).toBe('rollback');
    for (const s of ['SAVEPOINT a', 'RELEASE a', 'ROLLBACK TO a', 'rollback transaction to savepoint a']) expect(transactionControl(s)).toBe('savepoint');
    for (const s of ['SELECT 1', "INSERT INTO t VALUES ('BEGIN')", 'BEGINNING', 'CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; END', 'BEGIN nonsense']) {
      expect(transactionControl(s)).toBeNull();
    }
  });
});

describe('groupTransactions', () => {
  it('makes one batch of BEGIN … COMMIT and drops what ROLLBACK ends', () => {
    expect(groupTransactions(['CREATE TABLE t (x)', 'BEGIN', 'INSERT INTO t VALUES (1)', 'INSERT INTO t VALUES (2)', 'COMMIT', 'BEGIN', 'DELETE FROM t', 'ROLLBACK'])).toEqual([
      { kind: 'statement', sql: 'CREATE TABLE t (x)' },
      { kind: 'batch', statements: ['INSERT INTO t VALUES (1)', 'INSERT INTO t VALUES (2)'] },
    ]);
  });

  it('refuses what cannot be sent as batches, saying why', () => {
    expect(() => groupTransactions(['BEGIN', 'SELECT 1'])).toThrow(/BEGIN without COMMIT/);
    expect(() => groupTransactions(['COMMIT'])).toThrow(/COMMIT without BEGIN/);
    expect(() => groupTransactions(['BEGIN', 'BEGIN'])).toThrow(/do not nest/);
    expect(() => groupTransactions(['BEGIN', 'SAVEPOINT a'])).toThrow(/savepoints are not supported/);
  });
});
