import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../../test/helpers/env.ts';
import { FunctionLogStore, LINE_MAX_CHARS, LineSplitter, Redactor } from './logs.ts';

const P = 'prj_0000000000000001';

describe('Redactor', () => {
  const r = new Redactor([
    ['SHORT', 'abc'],
    ['LONG', 'abcdef-secret'],
    ['EMPTY', ''],
  ]);

  it('replaces every value by its name, the longer first', () => {
    expect(r.redact('x abcdef-secret y abc z abcabc')).toBe('x [secret LONG] y [secret SHORT] z [secret SHORT][secret SHORT]');
  });

  it('takes an empty value for no secret', () => {
    expect(r.redact('nothing here')).toBe('nothing here');
  });

  it('cuts a line without leaving the start of a value at its end', () => {
    expect(r.cut('0123456789abcdef-sec', 18)).toBe('0123456789');
    expect(r.cut('0123456789ab', 12)).toBe('0123456789');
    expect(r.cut('0123456789xy', 12)).toBe('0123456789xy');
  });
});

describe('LineSplitter', () => {
  const collect = (secrets: [string, string][] = []) => {
    const lines: string[] = [];
    return { lines, splitter: new LineSplitter(new Redactor(secrets), (l) => lines.push(l)) };
  };

  it('emits whole lines across chunks, without their line ends', () => {
    const { lines, splitter } = collect();
    splitter.push('one\ntw');
    splitter.push('o\r\nthr');
    expect(lines).toEqual(['one', 'two']);
    splitter.end();
    expect(lines).toEqual(['one', 'two', 'thr']);
  });

  it('redacts a value split across chunks', () => {
    const { lines, splitter } = collect([['TOKEN', 'sk-0123456789']]);
    splitter.push('key=sk-0123');
    splitter.push('456789 done\n');
    expect(lines).toEqual(['key=[secret TOKEN] done']);
  });

  it('cuts an overlong line and drops the rest of it, never a secret in part', () => {
    const secret = 'S'.repeat(100);
    const { lines, splitter } = collect([['BIG', secret]]);
    splitter.push('x'.repeat(LINE_MAX_CHARS - 50) + secret + 'y'.repeat(2 * LINE_MAX_CHARS));
    splitter.push('still the same line\nnext\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]!.endsWith(' […cut]')).toBe(true);
    expect(lines[0]!).not.toContain('S');
    expect(lines[1]).toBe('next');
  });
});

describe('FunctionLogStore', () => {
  it('appends lines with time, stream and version, rotates by size, and tails across the rotation', () => {
    const dir = tempDir('svc-fn-logs-');
    try {
      let now = Date.parse('2026-05-01T12:00:00.000Z');
      const store = new FunctionLogStore(dir.dir, 200, () => now);
      store.append(P, 'f', 3, 'stdout', ['hello']);
      expect(readFileSync(store.path(P, 'f'), 'utf8')).toBe('2026-05-01T12:00:00.000Z stdout v3 hello\n');
      for (let i = 0; i < 10; i++) {
        now += 1000;
        store.append(P, 'f', 3, 'stderr', [`line ${i}`]);
      }
      const last = store.tail(P, 'f', 4);
      expect(last.map((l) => l.split(' ').slice(1).join(' '))).toEqual(['stderr v3 line 6', 'stderr v3 line 7', 'stderr v3 line 8', 'stderr v3 line 9']);
      // The live file was rotated into .1: a long tail reads both, oldest first.
      const all = store.tail(P, 'f', 1000);
      expect(all.length).toBeGreaterThan(readFileSync(store.path(P, 'f'), 'utf8').split('\n').length - 1);
      expect(all.at(-1)).toMatch(/line 9$/);
      store.remove(P, 'f');
      expect(store.tail(P, 'f', 10)).toEqual([]);
    } finally {
      dir.cleanup();
    }
  });
});
