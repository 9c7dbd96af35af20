/**
 * The log on Node (the host agent, the Node entry, the local stack): pino writing the fields of
 * shared/log.ts as JSON lines on stderr, or readable lines through pino-pretty (docs/observability.md
 * "Logs"). `SVCD_LOG_FORMAT`: `json`, `pretty`, or `auto` (readable when stderr is a terminal);
 * `SVCD_LOG_LEVEL`: the least severe level written.
 */
import { pino, type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';
import { lineFields, type Log, type LogLevel } from './log.ts';

/** How readable lines look: one line each, local time, the message then the fields. */
export const PRETTY = { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', messageKey: 'msg', singleLine: true } as const;

/** How a Node process writes its log. */
export interface NodeLogOptions {
  /** Which process writes (`agent`, `handlers`, `stack`): the `service` field of every line. */
  service: string;
  level?: LogLevel;
  format?: 'auto' | 'json' | 'pretty';
  /** Where lines go (default stderr); tests hand in a stream. */
  destination?: DestinationStream;
  /** Whether the destination is a terminal (default: stderr's). */
  tty?: boolean;
}

/** A Node log and how to flush what it still holds before the process exits. */
export interface NodeLog {
  log: Log;
  flush(): void;
}

/** Builds the log of a Node process. */
export function createNodeLog({ service, level = 'info', format = 'auto', destination, tty = process.stderr.isTTY === true }: NodeLogOptions): NodeLog {
  const readable = format === 'pretty' || (format === 'auto' && tty);
  const out: DestinationStream =
    destination ??
    (readable
      ? pretty({ ...PRETTY, colorize: tty, sync: true, destination: 2 })
      : // Lines are written in batches of 4 KiB, and at least every 100 ms: a write per line cost the
        // /v2 listener, which logs every request, about a third of its CPU (docs/dataplane.md "Benchmark").
        pino.destination({ dest: 2, sync: false, minLength: 4096, periodicFlush: 100 }));
  const logger: Logger = pino(
    {
      level,
      base: { service },
      messageKey: 'msg',
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    out,
  );
  return {
    log: (msg, fields) => {
      const { level: at, rest } = lineFields(fields);
      logger[at](rest, msg);
    },
    flush: () => {
      try {
        logger.flush();
        (out as { flushSync?: () => void }).flushSync?.();
      } catch {
        // Nothing left to write, or a destination that cannot flush: either way nothing to wait for.
      }
    },
  };
}
