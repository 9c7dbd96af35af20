/**
 * `svc realtime tail|publish` (docs/realtime.md; docs/cli.md "Realtime"). `tail` prints events as
 * they are delivered (with `--json`, one JSON object per line), reconnecting as the SDK does, until
 * Ctrl-C or `--count` events; publish takes the payload as a JSON argument or on stdin.
 */
import type { Command } from 'commander';
import { createClient } from '../../client.ts';
import type { Cli } from '../context.ts';
import { UsageError } from '../errors.ts';
import { readStdin } from '../input.ts';
import type { Registry } from '../program.ts';
import { jsonArg, projectArg, PROJECT_HELP } from './args.ts';

/** Registers the realtime commands. */
export function register(program: Command, r: Registry): void {
  const realtime = program.command('realtime').description('publish events and watch channels');

  realtime
    .command('tail')
    .description('print the events of the channels as they are delivered (with SVC_KEY, as that project key)')
    .argument('<project>', PROJECT_HELP)
    .argument('<channels...>', 'one or more channels ("system" carries lifecycle events)')
    .option('--count <n>', 'leave after this many events')
    .action(
      r.action(async (cli, id: string, channels: string[], options: { count?: string }) => {
        cli.failure.project = projectArg(id);
        const count = options.count === undefined ? Infinity : Number(options.count);
        if (!(count >= 1) || !Number.isInteger(count) && count !== Infinity) throw new UsageError('--count must be a whole number, 1 or more');
        const client = cli.env.SVC_KEY ? subscribeAsKey(cli) : await cli.session();
        const stop = new AbortController();
        const onSignal = () => stop.abort(new DOMException('interrupted', 'AbortError'));
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
        let seen = 0;
        const c = cli.out.c;
        try {
          const events = client.project(id).realtime.subscribe(channels, {
            signal: stop.signal,
            onOpen: () => cli.out.note(cli.out.ce.dim(`subscribed to ${channels.join(', ')} of ${id}`)),
            onReconnect: ({ delayMs, error }) =>
              cli.out.note(cli.out.ce.yellow(`stream lost (${error instanceof Error ? error.message : String(error)}); reconnecting in ${delayMs} ms`)),
          });
          for await (const event of events) {
            if (cli.out.json) cli.io.stdout.write(`${JSON.stringify(event)}\n`);
            else cli.out.line(`${c.dim(event.ts)} ${c.cyan(event.channel)} ${c.bold(event.event)} ${JSON.stringify(event.payload)}`);
            if (++seen >= count) break;
          }
        } catch (err) {
          if (!stop.signal.aborted) throw err;
        } finally {
          process.removeListener('SIGINT', onSignal);
          process.removeListener('SIGTERM', onSignal);
        }
      }),
    );

  realtime
    .command('publish')
    .description('publish an event to a channel (owner session); the payload is JSON, "-" reads it from stdin')
    .argument('<project>', PROJECT_HELP)
    .argument('<channel>', 'the channel')
    .argument('<event>', 'the event name')
    .argument('[payload]', 'a JSON value (default null), or "-" for stdin')
    .action(
      r.action(async (cli, id: string, channel: string, event: string, payload: string | undefined) => {
        cli.failure.project = projectArg(id);
        const text = payload === '-' ? await readStdin(cli.io.stdin) : payload;
        const value = text === undefined ? undefined : jsonArg(text, 'the payload');
        const delivered = await cli.withSession((c) => c.project(id).realtime.publish(channel, event, value));
        cli.out.result(delivered, () => cli.out.line(`published #${delivered.id} ${delivered.channel} ${delivered.event} at ${delivered.ts}`));
      }),
    );
}

function subscribeAsKey(cli: Cli) {
  cli.failure.usedKey = true;
  return createClient({ baseUrl: cli.baseUrl(), key: cli.env.SVC_KEY! });
}
