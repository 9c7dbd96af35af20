/**
 * The memory limit of a function runtime's cgroup (./limits.ts `runtimeMemoryMb`): one function's
 * memory_mb, a small allowance for each other function's idle isolate, and workerd's own, within the
 * project's share, never less than one function's. The limit applied for real:
 * test/integration/functions-runtime.test.ts and test/e2e/functions-hostile.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { runtimeMemoryMb } from './limits.ts';

describe('runtimeMemoryMb', () => {
  it('gives one function its memory_mb and each other function only an idle isolate\'s allowance', () => {
    const one = runtimeMemoryMb(128, 1, 1024);
    const perSibling = runtimeMemoryMb(128, 2, 1024) - one;
    expect(perSibling).toBeGreaterThan(0);
    expect(perSibling).toBeLessThanOrEqual(16);
    expect(runtimeMemoryMb(128, 3, 1024) - one).toBe(2 * perSibling);
    // workerd's own share on top of the function's.
    expect(one).toBeGreaterThan(128);
    // Forty siblings never let one function hold anything near 1 GiB.
    expect(runtimeMemoryMb(128, 40, 4096)).toBeLessThan(1024);
  });

  it("stops at the project's share, but never below one function's memory_mb", () => {
    const overhead = runtimeMemoryMb(128, 1, 1024) - 128;
    expect(runtimeMemoryMb(128, 200, 1024)).toBe(overhead + 1024);
    expect(runtimeMemoryMb(1024, 1, 256)).toBe(overhead + 1024);
    expect(runtimeMemoryMb(1024, 5, 256)).toBe(overhead + 1024);
  });
});
