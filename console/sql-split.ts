/**
 * Splits an SQL script into statements for the SQL editor: the engine takes one statement per
 * `sql` (docs/engine.md "POST /v2/sql"), so a script of several is sent as a batch of them. Semicolons
 * inside quotes, identifiers, comments and trigger bodies (`CREATE TRIGGER … BEGIN …; …; END`) do
 * not split. The engine judges each statement; this only finds where they end.
 */

/** The statements of `script`, trimmed, without their final `;`; comments and blanks alone are dropped. */
export function splitStatements(script: string): string[] {
  const out: string[] = [];
  let start = 0;
  let i = 0;
  let trigger = false;
  let body = false;
  let caseDepth = 0;
  let words = 0;
  const n = script.length;
  const push = (end: number) => {
    const text = script.slice(start, end).trim();
    if (stripComments(text).trim() !== '') out.push(text);
    trigger = body = false;
    caseDepth = words = 0;
  };
  while (i < n) {
    const c = script[i]!;
    if (c === "'" || c === '"' || c === '`') {
      i = closing(script, i + 1, c);
    } else if (c === '[') {
      const end = script.indexOf(']', i + 1);
      i = end < 0 ? n : end + 1;
    } else if (c === '-' && script[i + 1] === '-') {
      const end = script.indexOf('\n', i + 2);
      i = end < 0 ? n : end + 1;
    } else if (c === '/' && script[i + 1] === '*') {
      const end = script.indexOf('*/', i + 2);
      i = end < 0 ? n : end + 2;
    } else if (/[A-Za-z_]/.test(c)) {
      let j = i + 1;
      while (j < n && /[A-Za-z0-9_$]/.test(script[j]!)) j++;
      const word = script.slice(i, j).toUpperCase();
      words++;
      if (words <= 4 && word === 'TRIGGER' && /^\s*CREATE\b/i.test(stripComments(script.slice(start, i)))) trigger = true;
      else if (trigger && !body && word === 'BEGIN') body = true;
      else if (body && word === 'CASE') caseDepth++;
      else if (body && word === 'END') {
        if (caseDepth > 0) caseDepth--;
        else body = trigger = false;
      }
      i = j;
    } else if (c === ';' && !body) {
      push(i);
      i++;
      start = i;
    } else {
      i++;
    }
  }
  push(n);
  return out;
}

/** The index after the quote that closes one opened before `from` (a doubled quote is an escaped one). */
function closing(s: string, from: number, quote: string): number {
  let i = from;
  for (;;) {
    const end = s.indexOf(quote, i);
    if (end < 0) return s.length;
    if (s[end + 1] === quote) {
      i = end + 2;
      continue;
    }
    return end + 1;
  }
}

function stripComments(text: string): string {
  return text.replace(/--[^\n]*(\n|$)/g, ' ').replace(/\/\*[\s\S]*?(\*\/|$)/g, ' ');
}
