/**
 * Counting the statements in a SQL string, so that `{"sql":"a; b"}` is refused instead of silently
 * running only `a` (node:sqlite's prepare() compiles the first statement and ignores the rest).
 *
 * This is SQLite's own `sqlite3_complete()` state machine (src/complete.c), which knows that the
 * semicolons inside `CREATE TRIGGER ... BEGIN ...; END` do not end the statement, walked over the
 * whole string and counting the statements it completes.
 */

// Token classes of complete.c.
const SEMI = 0;
const WS = 1;
const OTHER = 2;
const EXPLAIN = 3;
const CREATE = 4;
const TEMP = 5;
const TRIGGER = 6;
const END = 7;

// States: 0 INVALID (nothing yet), 1 START (after a complete statement), 2 NORMAL, 3 EXPLAIN,
// 4 CREATE, 5 TRIGGER (inside a trigger body), 6 SEMI (a semicolon inside a body), 7 END.
const TRANSITIONS: readonly (readonly number[])[] = [
  /* 0 INVALID */ [1, 0, 2, 3, 4, 2, 2, 2],
  /* 1 START   */ [1, 1, 2, 3, 4, 2, 2, 2],
  /* 2 NORMAL  */ [1, 2, 2, 2, 2, 2, 2, 2],
  /* 3 EXPLAIN */ [1, 3, 3, 2, 4, 2, 2, 2],
  /* 4 CREATE  */ [1, 4, 2, 2, 2, 4, 5, 2],
  /* 5 TRIGGER */ [6, 5, 5, 5, 5, 5, 5, 5],
  /* 6 SEMI    */ [6, 6, 5, 5, 5, 5, 5, 7],
  /* 7 END     */ [1, 7, 5, 5, 5, 5, 5, 5],
];

function isIdChar(code: number): boolean {
  return (
    (code >= 0x30 && code <= 0x39) ||
    (code >= 0x41 && code <= 0x5a) ||
    (code >= 0x61 && code <= 0x7a) ||
    code === 0x5f || // _
    code === 0x24 || // $
    code >= 0x80
  );
}

function keywordToken(word: string): number {
  switch (word.toLowerCase()) {
    case 'create':
      return CREATE;
    case 'trigger':
      return TRIGGER;
    case 'temp':
    case 'temporary':
      return TEMP;
    case 'end':
      return END;
    case 'explain':
      return EXPLAIN;
    default:
      return OTHER;
  }
}

/**
 * The number of statements in `sql`: 0 for text that is only whitespace, comments and semicolons;
 * an unterminated last statement counts as one.
 */
export function countStatements(sql: string): number {
  let state = 0;
  let count = 0;
  let i = 0;
  const n = sql.length;
  while (i < n) {
    const c = sql.charCodeAt(i);
    let token: number;
    if (c === 0x3b) {
      token = SEMI;
      i++;
    } else if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d) {
      token = WS;
      i++;
    } else if (c === 0x2f && sql.charCodeAt(i + 1) === 0x2a) {
      const close = sql.indexOf('*/', i + 2);
      i = close < 0 ? n : close + 2;
      token = WS;
    } else if (c === 0x2d && sql.charCodeAt(i + 1) === 0x2d) {
      const eol = sql.indexOf('\n', i + 2);
      i = eol < 0 ? n : eol + 1;
      token = WS;
    } else if (c === 0x5b) {
      const close = sql.indexOf(']', i + 1);
      i = close < 0 ? n : close + 1;
      token = OTHER;
    } else if (c === 0x60 || c === 0x22 || c === 0x27) {
      // A doubled quote inside reads as two adjacent quoted tokens: same state outcome.
      const close = sql.indexOf(sql[i] as string, i + 1);
      i = close < 0 ? n : close + 1;
      token = OTHER;
    } else if (isIdChar(c)) {
      let j = i + 1;
      while (j < n && isIdChar(sql.charCodeAt(j))) j++;
      token = keywordToken(sql.slice(i, j));
      i = j;
    } else {
      token = OTHER;
      i++;
    }
    const next = (TRANSITIONS[state] as readonly number[])[token] as number;
    if (token === SEMI && next === 1 && state !== 0 && state !== 1) count++;
    state = next;
  }
  if (state !== 0 && state !== 1) count++;
  return count;
}
