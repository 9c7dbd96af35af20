/** Measuring memory growth of the test process while a streaming operation runs. */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
/** V8's collector, exposed for the measurement. */
export const gc = runInNewContext('gc') as (options?: { type: 'minor' | 'major' }) => void;

/**
 * Runs `work` while sampling RSS; answers the growth over a post-GC baseline. Collecting while
 * sampling: garbage buffers are not growth (V8 otherwise lets tens of MiB of them pile up before a
 * GC), but a body a proxy holds cannot be collected and shows.
 */
export async function rssGrowth(work: () => Promise<void>): Promise<number> {
  gc();
  const base = process.memoryUsage().rss;
  let peak = base;
  let tick = 0;
  const timer = setInterval(() => {
    gc({ type: ++tick % 4 === 0 ? 'major' : 'minor' });
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 25);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return Math.max(peak, process.memoryUsage().rss) - base;
}
