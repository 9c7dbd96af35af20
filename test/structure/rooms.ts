/**
 * Small rooms (docs/architecture.md "Small rooms"): every source file outside `engine/` and the
 * tests holds at most 400 lines and every function in it at most 80. Parsed with oxc-parser, so a
 * function is what the language says it is (declarations, expressions, arrows, methods), measured
 * from its first line to its last.
 *
 *   node_modules/.bin/node test/structure/rooms.ts      prints every file and function over its limit
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { parseSync } from 'oxc-parser';

export const MAX_FILE_LINES = 400;
export const MAX_FUNCTION_LINES = 80;

const REPO = resolve(import.meta.dirname, '../..');
/** Top-level folders of source code; `engine/` is a program of its own and `test/` is the tests. */
const SOURCE_DIRS = ['shared', 'handlers', 'host-agent', 'infra', 'client', 'console', 'bin'];
const SOURCE = /\.(?:ts|tsx|js|mjs)$/;

/** A file or function over its limit. */
export interface Oversize {
  file: string;
  /** The function's name (or `<anonymous>`) and first line; absent for the file itself. */
  fn?: string;
  lines: number;
  limit: number;
}

/** Every source file the limits apply to, relative to the repository. */
export function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules') walk(path);
      } else if (SOURCE.test(entry.name) && !/\.test\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
        out.push(relative(REPO, path));
      }
    }
  };
  for (const dir of SOURCE_DIRS) {
    try {
      walk(join(REPO, dir));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  return out.sort();
}

type Node = { type: string; start: number; end: number; [k: string]: unknown };

const FUNCTIONS = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression']);

/** Files and functions of `file` over their limits. */
export function oversizeIn(file: string): Oversize[] {
  const text = readFileSync(join(REPO, file), 'utf8');
  const lineStarts = [0];
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) lineStarts.push(i + 1);
  const lineOf = (offset: number) => {
    let lo = 0;
    let hi = lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (lineStarts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  };
  const found: Oversize[] = [];
  const lines = text.endsWith('\n') ? lineStarts.length - 1 : lineStarts.length;
  if (lines > MAX_FILE_LINES) found.push({ file, lines, limit: MAX_FILE_LINES });
  const { program, errors } = parseSync(file, text, { lang: file.endsWith('x') ? 'tsx' : file.endsWith('.ts') ? 'ts' : 'js' });
  if (errors.length > 0) throw new Error(`${file}: ${errors[0]!.message}`);
  const visit = (node: unknown, name: string | undefined) => {
    if (!node || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      for (const child of node) visit(child, name);
      return;
    }
    const n = node as Node;
    let childName = name;
    if (n.type === 'VariableDeclarator' || n.type === 'PropertyDefinition' || n.type === 'MethodDefinition' || n.type === 'Property') {
      const id = (n.id ?? n.key) as { name?: string } | undefined;
      childName = id?.name ?? name;
    }
    if (typeof n.type === 'string' && FUNCTIONS.has(n.type)) {
      const first = lineOf(n.start);
      const span = lineOf(n.end) - first + 1;
      const fnName = (n.id as { name?: string } | null)?.name ?? name ?? '<anonymous>';
      if (span > MAX_FUNCTION_LINES) found.push({ file, fn: `${fnName} (line ${first})`, lines: span, limit: MAX_FUNCTION_LINES });
      childName = undefined;
    }
    for (const [key, value] of Object.entries(n)) {
      if (key !== 'type' && key !== 'start' && key !== 'end' && value && typeof value === 'object') visit(value, childName);
    }
  };
  visit(program, undefined);
  return found;
}

/** Every file and function over its limit in the tree. */
export function oversize(): Oversize[] {
  return sourceFiles().flatMap(oversizeIn);
}

if (import.meta.main) {
  const found = oversize();
  for (const o of found) console.log(`${o.file}${o.fn ? ` ${o.fn}` : ''}: ${o.lines} lines (limit ${o.limit})`);
  console.log(`${found.length} over the limits`);
}
