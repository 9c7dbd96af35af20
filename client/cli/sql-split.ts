/**
 * Where SQL statements end, by SQLite's own rule (the state machine of `sqlite3_complete`, which the
 * engine also counts statements with, docs/engine.md "POST /v2/sql"): a `;` outside strings,
 * quoted names and comments ends a statement, except inside the body of a `CREATE TRIGGER`, which
 * ends at `END;`. The shell uses it to know when a statement is complete; a script piped to
 * `svc sql` is split with it, since the engine takes one statement per `sql`.
 */

// Token classes and transitions of sqlite3_complete (SQLite's complete.c, with triggers).
const SEMI = 0;
const WS = 1;
const OTHER = 2;
const EXPLAIN = 3;
const CREATE = 4;
const TEMP = 5;
const TRIGGER = 6;
const END = 7;
const START = 1;
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

const KEYWORDS: Record<string, number> = { explain: EXPLAIN, create: CREATE, temp: TEMP, temporary: TEMP, trigger: TRIGGER, end: END };

/** The complete statements of `text` (without their final `;`, empty ones dropped) and what is left over. */
export function splitStatements(text: string): { statements: string[]; rest: string } {
  const statements: string[] = [];
  let state = 0;
  let start = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const ch = text[i]!;
    let token: number;
    let next = i + 1;
    if (ch === ';') token = SEMI;
    else if (/\s/.test(ch)) token = WS;
    else if (ch === '-' && text[i + 1] === '-') {
      const nl = text.indexOf('\n', i);
      if (nl < 0) break; // a comment still open: incomplete
      next = nl + 1;
      token = WS;
    } else if (ch === '/' && text[i + 1] === '*') {
      const close = text.indexOf('*/', i + 2);
      if (close < 0) break;
      next = close + 2;
      token = WS;
    } else if (ch === "'" || ch === '"' || ch === '`' || ch === '[') {
      const closer = ch === '[' ? ']' : ch;
      const close = text.indexOf(closer, i + 1);
      if (close < 0) break; // an open string: incomplete
      // A doubled quote inside is one quote: the scan goes on from the next character.
      next = close + 1;
      token = OTHER;
    } else if (/[A-Za-z_\u0080-\uffff]/.test(ch)) {
      let j = i + 1;
      while (j < n && /[A-Za-z0-9_$\u0080-\uffff]/.test(text[j]!)) j++;
      token = KEYWORDS[text.slice(i, j).toLowerCase()] ?? OTHER;
      next = j;
    } else token = OTHER;
    const before = state;
    state = TRANSITIONS[state]![token]!;
    if (token === SEMI && state === START && before !== START) {
      const statement = text.slice(start, i).trim();
      if (statement) statements.push(statement);
      start = i + 1;
    } else if (token === SEMI && state === START) {
      start = i + 1;
    }
    i = next;
  }
  return { statements, rest: text.slice(start) };
}

/** True when `text` holds nothing but whitespace and comments. */
export function isBlankSql(text: string): boolean {
  return text.replace(/--[^\n]*(\n|$)/g, '').replace(/\/\*[\s\S]*?\*\//g, '').trim() === '';
}
