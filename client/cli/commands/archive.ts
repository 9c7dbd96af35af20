/**
 * `svc snapshots download PROJECT SNAPSHOT [-o FILE]` and `svc import PROJECT FILE` (docs/cli.md
 * "Export and import"; docs/lifecycle.md "Export and import"): a snapshot as one tar file, and such a
 * file restored into a sleeping project as a new snapshot. Both stream (flat memory whatever the size)
 * with a progress bar on a terminal; a download is written to a temporary name, renamed into place
 * once complete.
 */
import { createWriteStream, openAsBlob, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import type { Cli } from '../context.ts';
import { CliError } from '../errors.ts';
import type { Registry } from '../program.ts';
import { projectArg, PROJECT_HELP } from './args.ts';

/** A bar on stderr when it is a terminal (and not `--json`), counting MiB; otherwise nothing. */
function archiveBar(cli: Cli, label: string, total: number | null): { tick(bytes: number): void; stop(): void } {
  if (!cli.io.stderr.isTTY || cli.out.json) return { tick() {}, stop() {} };
  const bar = new cliProgress.SingleBar(
    { stream: cli.io.stderr as NodeJS.WritableStream, format: `${label} [{bar}] {percentage}% {done}/{all} MiB | {eta_formatted}`, hideCursor: true },
    cliProgress.Presets.shades_classic,
  );
  const mib = (n: number) => (n / 1048576).toFixed(1);
  let done = 0;
  bar.start(total ?? 0, 0, { done: mib(0), all: mib(total ?? 0) });
  return {
    tick(bytes) {
      done += bytes;
      bar.update(total === null ? done : Math.min(done, total), { done: mib(done), all: mib(total ?? done) });
    },
    stop: () => bar.stop(),
  };
}

/** A pass-through stage that tells the bar of every chunk. */
function counting(tick: (bytes: number) => void): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc, next) {
      tick(chunk.length);
      next(null, chunk);
    },
  });
}

/** `svc snapshots download`, added to the `snapshots` group. */
function download(snapshots: Command, r: Registry): void {
  snapshots
    .command('download')
    .description('download a snapshot as one tar file (`svc import` takes it back)')
    .argument('<project>', PROJECT_HELP)
    .argument('<snapshot>', 'the snapshot id')
    .option('-o, --output <file>', 'where to write it (default: <project>-<snapshot>.tar here)')
    .action(
      r.action(async (cli, id: string, snapshotId: string, options: { output?: string }) => {
        cli.failure.project = projectArg(id);
        const archive = await cli.withSession((c) => c.project(id).snapshots.download(snapshotId));
        const target = options.output ?? archive.filename ?? `${id}-${snapshotId}.tar`;
        const partial = join(dirname(target), `.${basename(target)}.part-${process.pid}`);
        const bar = archiveBar(cli, `download ${snapshotId}`, archive.size);
        let written = 0;
        try {
          await pipeline(
            Readable.fromWeb(archive.body as import('node:stream/web').ReadableStream),
            counting((n) => {
              written += n;
              bar.tick(n);
            }),
            createWriteStream(partial, { flags: 'wx' }),
          );
          if (archive.size !== null && written !== archive.size) throw new CliError(`the download ended after ${written} of ${archive.size} bytes; run it again`);
          renameSync(partial, target);
        } catch (err) {
          rmSync(partial, { force: true });
          throw err;
        } finally {
          bar.stop();
        }
        cli.out.result({ file: target, bytes: written, snapshot_id: snapshotId }, () => cli.out.line(`${snapshotId} → ${target} (${written} bytes)`));
      }),
    );
}

/** `svc import`. */
function importCommand(program: Command, r: Registry): void {
  program
    .command('import')
    .description('restore a tar `svc snapshots download` wrote into a sleeping project, as a new snapshot (the previous data directory is kept)')
    .argument('<project>', PROJECT_HELP)
    .argument('<file>', 'the archive')
    .action(
      r.action(async (cli, id: string, file: string) => {
        cli.failure.project = projectArg(id);
        const blob = await openAsBlob(file).catch((err: NodeJS.ErrnoException) => {
          throw new CliError(`${file}: ${err.code === 'ENOENT' ? 'no such file' : err.message}`);
        });
        const bar = archiveBar(cli, `import ${basename(file)}`, blob.size);
        let imported;
        try {
          imported = await cli.withSession((c) => {
            const body = Readable.toWeb(Readable.fromWeb(blob.stream() as import('node:stream/web').ReadableStream).pipe(counting((n) => bar.tick(n)))) as ReadableStream<Uint8Array>;
            return c.project(id).snapshots.import(body, { size: blob.size });
          });
        } finally {
          bar.stop();
        }
        cli.out.result(imported, () => {
          cli.out.line(`${file} → ${id}: restored as snapshot ${imported.snapshot.id} at ${imported.restored_at}`);
          if (imported.replaced_dir) cli.out.line(`the previous data directory is kept: ${imported.replaced_dir}`);
        });
      }),
    );
}

/** Registers `svc snapshots download` (on the group lifecycle.ts made) and `svc import`. */
export function register(program: Command, r: Registry): void {
  const snapshots = program.commands.find((c) => c.name() === 'snapshots');
  if (snapshots) download(snapshots, r);
  importCommand(program, r);
}
