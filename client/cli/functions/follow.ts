/**
 * `svc functions logs NAME --follow` (docs/functions.md "Logs"): the logs route answers the last
 * lines (at most 1000), so following is polling it and printing what is new. What is new is what
 * follows the longest end of the previous answer that the new one starts with; when nothing
 * overlaps (more than a page was written between two polls, or the file rotated), the whole answer
 * is new.
 */

/** The lines of `current` that `previous` did not have. */
export function newLines(previous: readonly string[], current: readonly string[]): string[] {
  for (let start = 0; start < previous.length; start++) {
    const overlap = previous.length - start;
    if (overlap > current.length) continue;
    let same = true;
    for (let i = 0; i < overlap && same; i++) same = previous[start + i] === current[i];
    if (same) return current.slice(overlap);
  }
  return [...current];
}

/**
 * Polls `read` (each time the same page size, so answers line up) every `intervalMs` until `signal`
 * aborts, calling `print` with each new line; of the first answer only the last `firstTail` lines.
 */
export async function follow(
  read: () => Promise<string[]>,
  print: (line: string) => void,
  signal: AbortSignal,
  options: { intervalMs?: number; firstTail?: number } = {},
): Promise<void> {
  const { intervalMs = 1000, firstTail = Infinity } = options;
  let previous: string[] | null = null;
  while (!signal.aborted) {
    const current = await read();
    const fresh = previous === null ? current.slice(Math.max(0, current.length - firstTail)) : newLines(previous, current);
    for (const line of fresh) print(line);
    previous = current;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, intervalMs);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
