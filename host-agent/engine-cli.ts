/**
 * Runs one-shot engine commands (`version`, `init`, `status`, `backup`, `restore`) through the engine
 * contract (DESIGN §6): argv only, never a shell; one JSON document on stdout; exit codes mapped to
 * the service's errors. The agent never imports engine code.
 */
import { spawn } from 'node:child_process';
import { errors, ServiceError } from '../shared/errors.ts';
import { ENGINE_PIN } from '../shared/schemas.ts';

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

/** Runs `bin args...`, killing it after `timeoutMs`. A missing binary rejects with ENOENT. */
export function runEngine(bin: string, args: string[], timeoutMs: number): Promise<EngineResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      if (stdout.length < 1 << 20) stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      if (stderr.length < 1 << 16) stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      let json: Record<string, unknown> | null = null;
      const text = stdout.trim() || stderr.trim();
      try {
        const parsed = JSON.parse(text.split('\n').pop() ?? '');
        if (parsed && typeof parsed === 'object') json = parsed;
      } catch {
        json = null;
      }
      resolve({ code, signal, json, stderr });
    });
  });
}

/** The engine's message in its error document, for logs. */
export function engineMessage(result: EngineResult): string {
  const err = (result.json as { error?: { message?: unknown } } | null)?.error;
  return typeof err?.message === 'string' ? err.message : `exit ${result.code ?? result.signal}`;
}

/** Maps a failed engine command to the service error its exit code stands for. */
export function engineFailure(result: EngineResult, what: string): ServiceError {
  switch (result.code) {
    case ENGINE_EXIT.lockHeld:
      return new ServiceError('tenant_running', `${what}: the engine holds the data directory; sleep the project first`);
    case ENGINE_EXIT.notInitialized:
      return new ServiceError('tenant_not_running', `${what}: the tenant has never started`);
    case ENGINE_EXIT.corruptBackup:
      return errors.conflict(`${what}: the backup failed verification`);
    default:
      return errors.upstream(`${what}: the engine failed (${engineMessage(result)})`);
  }
}

/** The result of the pin check. */
export interface PinCheck {
  ok: boolean;
  version: Record<string, unknown> | null;
  reason: string | null;
}

/** Checks that the engine binary runs and reports the pinned version (contract "Versioning" 3). */
export async function checkPin(bin: string, timeoutMs = 15000): Promise<PinCheck> {
  let result: EngineResult;
  try {
    result = await runEngine(bin, ['version', '--json'], timeoutMs);
  } catch (err) {
    return { ok: false, version: null, reason: `engine binary ${bin} cannot run (${(err as NodeJS.ErrnoException).code ?? err})` };
  }
  if (result.code !== 0 || !result.json) {
    return { ok: false, version: null, reason: `engine version failed (${engineMessage(result)})` };
  }
  if (result.json.engine_version !== ENGINE_PIN) {
    return { ok: false, version: result.json, reason: `engine version ${String(result.json.engine_version)} is not the pin ${ENGINE_PIN}` };
  }
  return { ok: true, version: result.json, reason: null };
}
