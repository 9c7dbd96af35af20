/** Following a function's logs by polling (client/cli/functions/follow.ts). */
import { describe, expect, it } from 'vitest';
import { follow, newLines } from './follow.ts';

describe('newLines', () => {
  it('answers what follows the overlap of the two answers', () => {
    expect(newLines([], ['a', 'b'])).toEqual(['a', 'b']);
    expect(newLines(['a', 'b'], ['a', 'b'])).toEqual([]);
    expect(newLines(['a', 'b'], ['a', 'b', 'c'])).toEqual(['c']);
    // A page of the last lines: the oldest fell off the front.
    expect(newLines(['a', 'b', 'c'], ['b', 'c', 'd', 'e'])).toEqual(['d', 'e']);
  });

  it('keeps repeated lines that are new', () => {
    expect(newLines(['x', 'x'], ['x', 'x', 'x'])).toEqual(['x']);
    expect(newLines(['a', 'x'], ['x', 'x'])).toEqual(['x']);
  });

  it('answers everything when nothing overlaps (more than a page was written, or the file rotated)', () => {
    expect(newLines(['a', 'b'], ['c', 'd'])).toEqual(['c', 'd']);
  });
});

describe('follow', () => {
  it('prints each line once, polling until aborted', async () => {
    const answers = [['a'], ['a', 'b'], ['a', 'b'], ['b', 'c']];
    const printed: string[] = [];
    const stop = new AbortController();
    let calls = 0;
    await follow(
      async () => {
        const answer = answers[Math.min(calls++, answers.length - 1)]!;
        if (calls === answers.length) queueMicrotask(() => stop.abort());
        return answer;
      },
      (l) => printed.push(l),
      stop.signal,
      { intervalMs: 1 },
    );
    expect(printed).toEqual(['a', 'b', 'c']);
  });

  it('prints only the last lines of the first answer', async () => {
    const printed: string[] = [];
    const stop = new AbortController();
    await follow(
      async () => {
        queueMicrotask(() => stop.abort());
        return ['a', 'b', 'c'];
      },
      (l) => printed.push(l),
      stop.signal,
      { intervalMs: 1, firstTail: 2 },
    );
    expect(printed).toEqual(['b', 'c']);
  });
});
