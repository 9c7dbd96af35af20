/**
 * Runs one-shot engine commands (`version`, `init`, `status`, `backup`, `restore`, each declared in
 * ./engine-commands.ts) through the engine contract (docs/engine.md "CLI"): argv only, never a
 * shell; one JSON document on stdout; exit codes mapped to the service's errors. Engines run with a
 * minimal environment (no `SVCD_*` settings: secrets never reach an engine), and what an engine says
 * goes to the tenant's log, never to a client. The agent never imports engine code.
 */
import { spawn } from 'node:child_process';
import { errors, ServiceError } from '../shared/errors.ts';
import { ENGINE_PIN } from '../shared/schemas/projects.ts';
import { parseResult, versionCommand } from './engine-commands.ts';

/** Exit codes of the engine contract (docs/engine.md). */
export const ENGINE_EXIT = {
  ok: 0,
  internal: 1,
  badArguments: 2,
  lockHeld: 3,
  notInitialized: 4,
  corruptBackup: 5,
  targetExists: 6,
} as const;

/** What a finished engine command said. */
export interface EngineResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  json: Record<string, unknown> | null;
  stderr: string;
}

/** The engine's message in its error document, for logs. */
export function engineMessage(result: EngineResult): string {
  const err = (result.json as { error?: { message?: unknown } } | null)?.error;
  return typeof err?.message === 'string' ? err.message : `exit ${result.code ?? result.signal}`;
}

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

/** The result of the pin check. */
export interface PinCheck {
  ok: boolean;
  version: Record<string, unknown> | null;
  reason: string | null;
}

/**
 * Checks that the engine binary runs and reports the pinned version (contract "Versioning" 3). `argv`
 * makes the command as the agent runs engines (host-agent/tenants/engine-launch.ts: as the engine
 * user), so a binary that user cannot run fails the check; it throws when no engine can run here.
 */
export async function checkPin(bin: string, timeoutMs = 15000, argv: (args: string[]) => string[] = (args) => [bin, ...args]): Promise<PinCheck> {
  let result: EngineResult;
  try {
    const [command, ...args] = argv(versionCommand.argv(undefined));
    result = await runCommand(command!, args, engineEnvironment(null), timeoutMs);
  } catch (err) {
    if (!(err as NodeJS.ErrnoException).code) return { ok: false, version: null, reason: (err as Error).message };
    return { ok: false, version: null, reason: `engine binary ${bin} cannot run (${(err as NodeJS.ErrnoException).code ?? err})` };
  }
  if (result.code !== 0 || !result.json) {
    return { ok: false, version: null, reason: `engine version failed (${engineMessage(result)})` };
  }
  const version = parseResult(versionCommand, result.json);
  if (!version.ok || version.value.engine_version !== ENGINE_PIN) {
    return { ok: false, version: result.json, reason: `engine version ${String(result.json.engine_version)} is not the pin ${ENGINE_PIN}` };
  }
  return { ok: true, version: result.json, reason: null };
}
