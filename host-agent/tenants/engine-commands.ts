/**
 * One-shot engine commands of the lifecycle (`init`, `status`, `backup`, `restore`) through the engine
 * contract (DESIGN §6), with the engine environment (no `SVCD_*` settings: secrets never reach an
 * engine) and with everything the engine says written to the tenant's log, never to a client: a
 * failure is answered with the contract error its exit code stands for and a short message of ours.
 */
import { spawn } from 'node:child_process';
import { ServiceError, errors } from '../../shared/errors.ts';
import { ENGINE_EXIT, type EngineResult } from '../engine-cli.ts';

/**
 * The environment engines run with: the process basics only, plus Node's compile cache (the
 * reference engine is a Node program; the cache halves its start-up, measured in
 * test/bench/lifecycle.bench.ts). Any other engine build ignores the variable.
 */
export function engineEnvironment(compileCache: string | null): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const name of ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR']) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  env.PATH ??= '/usr/local/bin:/usr/bin:/bin';
  if (compileCache) env.NODE_COMPILE_CACHE = compileCache;
  return env;
}

/** Runs `bin args...` with `env`, killing it after `timeoutMs`. A missing binary rejects with ENOENT. */
export function runCommand(bin: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<EngineResult & { timedOut: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      if (stdout.length < 1 << 20) stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      if (stderr.length < 1 << 16) stderr += d;
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      let json: Record<string, unknown> | null = null;
      const lines = stdout.trim().split('\n');
      try {
        const parsed = JSON.parse(lines[lines.length - 1] ?? '');
        if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) json = parsed;
      } catch {
        json = null;
      }
      resolve({ code, signal, json, stderr: stdout.trim() && !json ? `${stdout}\n${stderr}` : stderr, timedOut });
    });
  });
}

/**
 * Maps a failed one-shot command to the error its exit code stands for (docs/engine.md). The engine's
 * own message is logged by the caller, not put into the answer.
 */
export function commandFailure(result: EngineResult & { timedOut?: boolean }, what: string): ServiceError {
  if (result.timedOut) return errors.upstream(`${what}: the engine did not finish in time`);
  switch (result.code) {
    case ENGINE_EXIT.lockHeld:
      return new ServiceError('tenant_running', `${what}: the engine holds the data directory; sleep the project first`);
    case ENGINE_EXIT.notInitialized:
      return new ServiceError('tenant_not_running', `${what}: the tenant has never started, it has no data directory`);
    case ENGINE_EXIT.corruptBackup:
      return errors.conflict(`${what}: the backup failed the engine's verification`);
    case ENGINE_EXIT.targetExists:
      return errors.conflict(`${what}: the engine's target directory already exists`);
    default:
      return errors.upstream(`${what}: the engine failed (exit ${result.code ?? result.signal}); see the tenant log`);
  }
}
