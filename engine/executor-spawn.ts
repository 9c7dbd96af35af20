/**
 * Starts an executor process of `serve` (./executor-main.ts, docs/engine.md "Statement time limit").
 * A module of its own, light on imports, so that `serve` starts its first executor before it loads
 * anything else: the two processes boot side by side, and the executor opens the database only once
 * `serve` holds the directory lock and tells it to.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const EXECUTOR_MAIN = fileURLToPath(new URL('./executor-main.ts', import.meta.url));

/** Spawns an executor for `dataDir`: frames on its stdin and stdout, its stderr shared with `serve`. */
export function spawnExecutor(dataDir: string): ChildProcess {
  const child = spawn(process.execPath, [...process.execArgv, EXECUTOR_MAIN, dataDir], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: process.env,
  });
  // A write to an executor that just died is answered by its exit, not by an exception.
  child.stdin!.on('error', () => {});
  return child;
}
