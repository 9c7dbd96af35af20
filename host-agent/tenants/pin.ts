/**
 * The engine pin check (docs/lifecycle.md "Pin check"): the engine binary must run and report the
 * pinned version before any tenant starts. The check runs at start and again before each engine
 * start, but the version command is re-run only when the binary's identity changed or the last check
 * failed, so a healthy start costs one stat().
 */
import { statSync } from 'node:fs';
import { errors } from '../../shared/errors.ts';
import { ENGINE_PIN } from '../../shared/schemas/projects.ts';
import { checkPin, type PinCheck } from '../engine-cli.ts';

/** The latest pin check as the rest of the agent reads it (health, heartbeat, answers): never written by them. */
export interface PinView {
  readonly ok: boolean;
  readonly version: PinCheck['version'];
  readonly reason: PinCheck['reason'];
}

/** The pinned engine's stat identity: a replaced or removed binary is re-checked before the next start. */
export function binaryIdentity(bin: string): string | null {
  try {
    const s = statSync(bin);
    if (!s.isFile() || (s.mode & 0o111) === 0) return null;
    return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
  } catch {
    return null;
  }
}

/** The pin check of one engine binary: its latest result, and the check before each start. */
export class EnginePin implements PinView {
  readonly #bin: string;
  readonly #timeoutMs: number;
  readonly #log: (line: string) => void;
  readonly #argv: ((args: string[]) => string[]) | undefined;
  #check: PinCheck;
  #identity: string | null;
  #running: Promise<PinCheck> | null = null;

  /**
   * `first` is the check made at the agent's start; `argv` makes the version command the way engines
   * are started (./engine-launch.ts), default the binary alone.
   */
  constructor(bin: string, first: PinCheck, timeoutMs: number, log: (line: string) => void, argv?: (args: string[]) => string[]) {
    this.#bin = bin;
    this.#argv = argv;
    this.#check = first;
    this.#timeoutMs = timeoutMs;
    this.#log = log;
    this.#identity = first.ok ? binaryIdentity(bin) : null;
  }

  /** Runs the first check of `bin` (logged when it fails) and answers the pin over it. */
  static async check(bin: string, timeoutMs: number, log: (line: string) => void, argv?: (args: string[]) => string[]): Promise<EnginePin> {
    const first = await checkPin(bin, timeoutMs, argv);
    if (!first.ok) log(`agent: engine pin check failed: ${first.reason}; tenants cannot run on this host`);
    return new EnginePin(bin, first, timeoutMs, log, argv);
  }

  get ok(): boolean {
    return this.#check.ok;
  }

  get version(): PinCheck['version'] {
    return this.#check.version;
  }

  get reason(): PinCheck['reason'] {
    return this.#check.reason;
  }

  /** The engine version string the pin check read, when it read one. */
  engineVersion(): string | null {
    const version = this.#check.version?.engine_version;
    return typeof version === 'string' ? version : null;
  }

  /** Re-checks when the binary changed or the last check failed; throws 503 when tenants cannot run. */
  async ensure(): Promise<void> {
    const identity = binaryIdentity(this.#bin);
    if (identity === null) {
      this.#check = { ok: false, version: null, reason: `engine binary ${this.#bin} is missing or not executable` };
      this.#identity = null;
    } else if (!this.#check.ok || identity !== this.#identity) {
      this.#running ??= checkPin(this.#bin, this.#timeoutMs, this.#argv).finally(() => {
        this.#running = null;
      });
      const pin = await this.#running;
      this.#check = pin;
      this.#identity = identity;
      if (!pin.ok) this.#log(`agent: engine pin check failed: ${pin.reason}`);
    }
    if (!this.#check.ok) {
      // The reason (with host paths) goes to the agent's log; the client learns the class of fault.
      throw errors.orchestrator(`this host cannot run tenants: the engine binary is missing or is not version ${ENGINE_PIN}`);
    }
  }
}
