/**
 * The memory limit of a function runtime's cgroup (./runtime.ts `runtimeMemoryMb`): room for each
 * function it runs at its memory_mb plus workerd's own, within the project's share, never less than
 * one function's. The limit applied for real: test/integration/functions-runtime.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { runtimeMemoryMb } from './runtime.ts';

describe('runtimeMemoryMb', () => {
  it('grows with the functions the runtime runs, by their memory_mb', () => {
    const one = runtimeMemoryMb(128, 1, 1024);
    expect(runtimeMemoryMb(128, 2, 1024) - one).toBe(128);
    expect(runtimeMemoryMb(128, 3, 1024) - one).toBe(256);
    expect(runtimeMemoryMb(48, 2, 1024) - runtimeMemoryMb(48, 1, 1024)).toBe(48);
    // workerd's own share on top of the functions'.
    expect(one).toBeGreaterThan(128);
  });

  it('stops at the project\'s share, but never below one function\'s memory_mb', () => {
    const overhead = runtimeMemoryMb(128, 1, 1024) - 128;
    expect(runtimeMemoryMb(128, 8, 1024)).toBe(overhead + 1024);
    expect(runtimeMemoryMb(128, 100, 1024)).toBe(overhead + 1024);
    expect(runtimeMemoryMb(1024, 1, 256)).toBe(overhead + 1024);
    expect(runtimeMemoryMb(1024, 5, 256)).toBe(overhead + 1024);
  });
});
