// Small rooms and no Node internals (docs/architecture.md "Small rooms"): a file or function that
// outgrows its limit, or code that reaches into an underscore member of Node's objects, fails here.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { oversize, oversizeIn, sourceFiles } from './rooms.ts';

const REPO = resolve(import.meta.dirname, '../..');

describe('small rooms', () => {
  it('no source file over 400 lines and no function over 80', () => {
    const found = oversize().map((o) => `${o.file}${o.fn ? ` ${o.fn}` : ''}: ${o.lines} lines`);
    expect(found).toEqual([]);
  });

  it('the measure sees nested functions, methods and arrows', () => {
    // This file's own checker is measured like any other: it has no function over the limit.
    expect(oversizeIn('test/structure/rooms.ts')).toEqual([]);
    expect(sourceFiles()).toContain('handlers/index.ts');
    expect(sourceFiles().some((f) => f.startsWith('engine/') || f.endsWith('.test.ts'))).toBe(false);
  });
});

describe('no Node internals', () => {
  it('nothing reads, assigns or calls an underscore member (socket._write, _handle, _httpMessage, …)', () => {
    const found: string[] = [];
    for (const file of sourceFiles()) {
      const text = readFileSync(join(REPO, file), 'utf8');
      text.split('\n').forEach((line, i) => {
        if (/\??\._[A-Za-z]\w*/.test(line.replace(/\/\/.*$|'[^']*'|"[^"]*"|`[^`]*`/g, ''))) found.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(found).toEqual([]);
  });

  it("nothing replaces a method of a Node socket, message or response (socket.destroySoon = …, res.write = …)", () => {
    // Overriding in a subclass (`override destroy()`) is the public way; assigning to another object's method patches it.
    const patched = /(?<!\bthis)\??\.(destroySoon|destroy|write|end|emit|read|push|setTimeout|writeHead|onread)\s*=(?!=)/;
    // The text of a module that runs inside a function's workerd isolate and captures its process.stdout (no Node object).
    const isolateText = (file: string, line: string) => file === 'host-agent/functions/supervisor.js' && /\bout\.write = \(chunk\)/.test(line);
    const found: string[] = [];
    for (const file of sourceFiles()) {
      const text = readFileSync(join(REPO, file), 'utf8');
      text.split('\n').forEach((line, i) => {
        if (isolateText(file, line)) return;
        if (patched.test(line.replace(/\/\/.*$|'[^']*'|"[^"]*"|`[^`]*`/g, ''))) found.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(found).toEqual([]);
  });
});
