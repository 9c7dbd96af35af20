/**
 * The limits of a function runtime's cgroup (docs/functions.md "Isolation", "Memory"): its memory,
 * from its functions' `memory_mb`, and its tasks.
 */

/** Tasks (threads) one runtime may have: workerd's own and a margin. */
export const RUNTIME_PIDS_MAX = 64;
/**
 * Memory a runtime needs besides its functions: workerd's own buffers grow with the request rate
 * (the functions benchmark prints the peak, about 350 MiB at 5,500 invocations a second here; with
 * 96 MiB a runtime answering "ok" was killed under that load).
 */
const RUNTIME_OVERHEAD_MB = 384;
/** Memory counted for each further function's isolate in a runtime (an idle isolate holds a few MiB). */
const ISOLATE_ALLOWANCE_MB = 8;

/**
 * The memory limit of a runtime running `functions` functions of `memoryMb` each: one function's
 * `memory_mb` (its heap, and its array buffers, which live outside the heap and which only this limit
 * bounds), ISOLATE_ALLOWANCE_MB for each other function's isolate at rest, and what workerd needs
 * itself; at most the project's share of the host (`SVCD_FUNCTION_PROJECT_MEMORY_MB`), never less
 * than one function's. So no function of it can hold much past its own `memory_mb`, however many
 * siblings it has, while idle siblings never push the runtime over.
 */
export function runtimeMemoryMb(memoryMb: number, functions: number, projectMb: number): number {
  return RUNTIME_OVERHEAD_MB + Math.max(memoryMb, Math.min(memoryMb + ISOLATE_ALLOWANCE_MB * (functions - 1), projectMb));
}

/** How often, at most, a runtime's resident memory is read when one of its invocations ends. */
export const RECYCLE_CHECK_MS = 1000;

/**
 * The resident memory past which a runtime is recycled (./runtimes.ts; docs/functions.md "Memory"):
 * its memory limit (`limitBytes`, from `runtimeMemoryMb`) less one function's `memory_mb`. workerd's
 * allocator keeps what it took under load, so what workerd holds itself grows with the request rate
 * it has seen; past this bound that leaves less than a function's `memory_mb` under the limit, and a
 * fresh runtime takes the next invocations before the kernel would end this one mid-invocation.
 */
export function recycleBytes(limitBytes: number, memoryMb: number): number {
  return limitBytes - memoryMb * 1024 * 1024;
}
