/**
 * The service's log (docs/observability.md "Logs"): one JSON object per line with `time`, `level`,
 * `service`, `msg` and the fields of the event. Every component writes through a `Log` handed to it;
 * on Node it is pino (shared/log-node.ts), in the worker entry and behind a function gateway the same
 * fields go out as JSON lines through `console` (`consoleLog`), since pino is not made for workerd.
 *
 * Secrets never reach a line: nothing logs a header, a body or a query string, and as a second line
 * of defence any field named like a credential is replaced by `[redacted]` (`SECRET_FIELDS`),
 * however deep. Web-standard only: the handlers bundle imports it.
 */

/** Severity of a line. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** Structured fields of a line (docs/observability.md "Fields"); any other name may be added. */
export interface LogFields {
  /** Default `warn`: a line with no fields is a warning with its cause in the message. */
  level?: LogLevel;
  /** What happened: `request`, `wakeup`, `sleep`, `snapshot`, `restore`, `adoption`, `reconcile`, … */
  event?: string;
  request_id?: string;
  method?: string;
  /** The route pattern (`/v0/projects/:id`), never the raw path. */
  route?: string;
  status?: number;
  duration_ms?: number;
  project_id?: string;
  account_id?: string;
  /** A failure: logged as its name, message and stack. */
  err?: unknown;
  [field: string]: unknown;
}

/** Where a component writes its log: a message and, optionally, structured fields. */
export type Log = (msg: string, fields?: LogFields) => void;

/** Field names whose values are credentials or secrets: replaced wherever they appear. */
export const SECRET_FIELDS = [
  'authorization',
  'cookie',
  'set-cookie',
  'token',
  'key',
  'secret',
  'account_secret',
  'value',
  'password',
  'invite_code',
] as const;

const SECRET = new Set<string>(SECRET_FIELDS);

/** What replaces a secret field's value. */
export const REDACTED = '[redacted]';

/** The levels in order; a line below the configured one is dropped. */
export const LEVELS: Record<LogLevel, number> = { debug: 20, info: 30, warn: 40, error: 50 };

/** An error as plain fields (its message and stack, never anything it holds). */
export function errorFields(err: unknown): Record<string, unknown> {
  if (err instanceof Error) {
    return { type: err.name, message: err.message, ...(err.stack ? { stack: err.stack } : {}), ...('code' in err ? { code: String(err.code) } : {}) };
  }
  return { message: String(err) };
}

/** `value` with every secret-named field replaced, however deep (objects and arrays are copied). */
export function redact(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== 'object' || depth > 8) return value;
  if (value instanceof Error) return errorFields(value);
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = SECRET.has(k.toLowerCase()) ? REDACTED : redact(v, depth + 1);
  return out;
}

/** The fields of a line as written: redacted, `err` as plain fields, `level` taken out. */
export function lineFields(fields: LogFields | undefined): { level: LogLevel; rest: Record<string, unknown> } {
  if (!fields) return { level: 'warn', rest: {} };
  const { level = 'warn', err, ...others } = fields;
  const rest = redact(others) as Record<string, unknown>;
  if (err !== undefined) rest.err = errorFields(err);
  return { level, rest };
}

/**
 * A `Log` writing one JSON line per call through `console` (the worker entry, the function
 * gateway): the fields pino writes on Node, with `level` as its name.
 */
export function consoleLog(service: string, minimum: LogLevel = 'info'): Log {
  return (msg, fields) => {
    const { level, rest } = lineFields(fields);
    if (LEVELS[level] < LEVELS[minimum]) return;
    const line = JSON.stringify({ time: new Date().toISOString(), level, service, ...rest, msg });
    if (LEVELS[level] >= LEVELS.warn) console.error(line);
    else console.log(line);
  };
}
