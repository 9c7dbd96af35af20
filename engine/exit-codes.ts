/**
 * The engine CLI's failure classes and their exit codes (docs/engine.md "Exit codes").
 * The host agent maps these numbers to service errors, so they never change meaning: add a class,
 * never renumber one. The JSON error document's `code` is the class name.
 */
export const EXIT_CODES = {
  ok: 0,
  /** Anything not covered below: an I/O failure, a port already in use, a damaged data directory. */
  internal: 1,
  /** Unknown command or option, missing or malformed value. */
  bad_arguments: 2,
  /** The data directory's lock is held by a live process (normally a running `serve`). */
  lock_held: 3,
  /** The data directory does not exist or was never initialized by `init`. */
  not_initialized: 4,
  /** A backup is missing, incomplete, or fails its digests or the database integrity check. */
  corrupt_backup: 5,
  /** The directory to create (init, backup, restore) already exists and is not empty. */
  target_exists: 6,
} as const;

/** A failure class name; also the `code` of the JSON error document. */
export type FailureClass = Exclude<keyof typeof EXIT_CODES, 'ok'>;

/** A CLI failure that main.ts renders as `{"error":{"code","message"}}` and an exit code. */
export class EngineCliError extends Error {
  readonly code: FailureClass;

  constructor(code: FailureClass, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EngineCliError';
    this.code = code;
  }

  /** The process exit code of this failure's class. */
  get exitCode(): number {
    return EXIT_CODES[this.code];
  }
}
