/**
 * The tenant's lifecycle (the interface contract "States and transitions"; docs/lifecycle.md):
 * `wakeup`, `sleep`, `head`, `restore` and `snapshots create|list|get`.
 */
import type { Command } from 'commander';
import type { Snapshot } from '../../types.ts';
import type { Registry } from '../program.ts';
import { UsageError } from '../errors.ts';
import { projectArg, PROJECT_HELP } from './args.ts';
import { listOptions, printList, type ListOptions } from './lists.ts';
import { printProject } from './projects.ts';

const printSnapshot = (s: Snapshot) => [s.id, s.label ?? '', s.created_at, s.lineage.visible_csn, s.backup.total_bytes];
const snapshotHead = ['id', 'label', 'created_at', 'visible_csn', 'bytes'];

/** Registers the lifecycle commands. */
export function register(program: Command, r: Registry): void {
  wakeupAndSleep(program, r);
  head(program, r);
  restore(program, r);
  snapshotCommands(program, r);
  logs(program, r);
}

/** `svc wakeup` and `svc sleep`. */
function wakeupAndSleep(program: Command, r: Registry): void {
  for (const [name, description] of [
    ['wakeup', "start the project's engine (idempotent; the data directory is made on the first start)"],
    ['sleep', "stop the project's engine gracefully, keeping its data (idempotent)"],
  ] as const) {
    program
      .command(name)
      .description(description)
      .argument('<project>', PROJECT_HELP)
      .action(
        r.action(async (cli, id: string) => {
          cli.failure.project = projectArg(id);
          const project = await cli.withSession((c) => (name === 'wakeup' ? c.project(id).wakeup() : c.project(id).sleep()));
          cli.out.result(project, () => printProject(cli, project));
        }),
      );
  }
}

/** `svc head`: what the engine says about itself. */
function head(program: Command, r: Registry): void {
  program
    .command('head')
    .description('what the engine says about itself: a live probe when running, its offline status when asleep')
    .argument('<project>', PROJECT_HELP)
    .action(
      r.action(async (cli, id: string) => {
        cli.failure.project = projectArg(id);
        const head = await cli.withSession((c) => c.project(id).head());
        cli.out.result(head, () => cli.out.fields({ ...head }));
      }),
    );
}

/** `svc restore`: a snapshot's state in place of the data directory. */
function restore(program: Command, r: Registry): void {
  program
    .command('restore')
    .description("replace the sleeping project's data directory by a snapshot's state (the previous one is kept aside)")
    .argument('<project>', PROJECT_HELP)
    .argument('<snapshot>', 'the snapshot id')
    .action(
      r.action(async (cli, id: string, snapshotId: string) => {
        cli.failure.project = projectArg(id);
        const restored = await cli.withSession((c) => c.project(id).restore(snapshotId));
        cli.out.result(restored, () =>
          cli.out.fields({ state: restored.state, snapshot_id: restored.snapshot_id, restored_at: restored.restored_at, replaced_dir: restored.replaced_dir }),
        );
      }),
    );
}

/** `svc snapshots create|list|delete|get`. */
function snapshotCommands(program: Command, r: Registry): void {
  const snapshots = program.command('snapshots').description("verified backups of a sleeping project's data directory");

  snapshots
    .command('create')
    .description('take a snapshot (the project must be asleep: `svc sleep PROJECT`)')
    .argument('<project>', PROJECT_HELP)
    .option('--label <label>', 'a label, at most 64 characters')
    .action(
      r.action(async (cli, id: string, options: { label?: string }) => {
        cli.failure.project = projectArg(id);
        const snapshot = await cli.withSession((c) => c.project(id).snapshots.create(options.label === undefined ? {} : { label: options.label }));
        cli.out.result(snapshot, () => cli.out.table(snapshotHead, [printSnapshot(snapshot)]));
      }),
    );

  listOptions(snapshots.command('list').description("the project's snapshots, newest first").argument('<project>', PROJECT_HELP)).action(
    r.action(async (cli, id: string, options: ListOptions) => {
      cli.failure.project = projectArg(id);
      await printList(cli, options, (c, page) => c.project(id).snapshots.list(page), { field: 'snapshots', head: snapshotHead, row: printSnapshot, more: `svc snapshots list ${id}` });
    }),
  );

  snapshots
    .command('delete')
    .description('delete a snapshot and its backup directory')
    .argument('<project>', PROJECT_HELP)
    .argument('<snapshot>', 'the snapshot id')
    .action(
      r.action(async (cli, id: string, snapshotId: string) => {
        cli.failure.project = projectArg(id);
        const snapshot = await cli.withSession((c) => c.project(id).snapshots.delete(snapshotId));
        cli.out.result(snapshot, () => cli.out.line(`deleted ${snapshot.id}`));
      }),
    );

  snapshots
    .command('get')
    .description('one snapshot')
    .argument('<project>', PROJECT_HELP)
    .argument('<snapshot>', 'the snapshot id')
    .action(
      r.action(async (cli, id: string, snapshotId: string) => {
        cli.failure.project = projectArg(id);
        const snapshot = await cli.withSession((c) => c.project(id).snapshots.get(snapshotId));
        cli.out.result(snapshot, () => cli.out.fields({ ...snapshot }));
      }),
    );
}

/** `svc logs`: the engine's last lines, or with `--follow` each new one until Ctrl-C. */
function logs(program: Command, r: Registry): void {
  program
    .command('logs')
    .description("the engine's last log lines; --follow keeps printing new ones until Ctrl-C")
    .argument('<project>', PROJECT_HELP)
    .option('--tail <n>', 'lines, 1 to 10000 (default 100)')
    .option('-f, --follow', 'keep printing new lines')
    .action(
      r.action(async (cli, id: string, options: { tail?: string; follow?: boolean }) => {
        cli.failure.project = projectArg(id);
        if (options.tail !== undefined && !/^\d+$/.test(options.tail)) throw new UsageError('--tail must be a whole number');
        const tail = options.tail === undefined ? {} : { tail: Number(options.tail) };
        if (!options.follow) {
          const logs = await cli.withSession((c) => c.project(id).logs(tail));
          cli.out.result(logs, () => logs.lines.forEach((l) => cli.out.line(l)));
          return;
        }
        const stop = new AbortController();
        const onSignal = () => stop.abort(new DOMException('interrupted', 'AbortError'));
        process.once('SIGINT', onSignal);
        try {
          const client = await cli.session();
          for await (const line of client.project(id).followLogs({ ...tail, signal: stop.signal })) {
            cli.io.stdout.write(cli.out.json ? `${JSON.stringify(line)}\n` : `${line}\n`);
          }
        } catch (err) {
          if (!stop.signal.aborted) throw err;
        } finally {
          process.removeListener('SIGINT', onSignal);
        }
      }),
    );
}
