/**
 * `svc storage buckets|ls|cp|rm` (the interface contract's storage endpoints; docs/storage.md;
 * docs/cli.md "Storage"). Remote objects are written `PROJECT:bucket/key`. `cp` streams both ways —
 * a file is sent as it is read and written to a temporary file renamed into place when complete — with
 * a progress bar on a terminal.
 */
import { createWriteStream, openAsBlob, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import type { UploadBody } from '../../storage.ts';
import type { Bucket } from '../../types.ts';
import type { Cli } from '../context.ts';
import { CliError, UsageError } from '../errors.ts';
import type { Registry } from '../program.ts';
import { projectArg } from './args.ts';
import { resumeStore, type ResumeStore } from './storage-resume.ts';
import { listOptions, moreNote, pageInput, printList, readList, type ListOptions, type ListView } from './lists.ts';

/** A remote location: `PROJECT:bucket/key`, the key optional (or a prefix); PROJECT '' for the linked one. */
export interface Remote {
  project: string;
  bucket: string;
  key: string;
}

const REMOTE = /^([^:/\\]*):([^/]*)(?:\/([\s\S]*))?$/;

/**
 * `PROJECT:bucket[/key]` parsed (PROJECT a name or an id; `:bucket/key` the linked project's), or null
 * for a local path: one with a `/` before its first `:` (`./a:b` is always local), or a drive (`C:\`).
 */
export function parseRemote(spec: string): Remote | null {
  const m = REMOTE.exec(spec);
  if (!m || /^[A-Za-z]:[\\/]/.test(spec)) return null;
  if (!m[2]) throw new UsageError(`${spec}: name a bucket after the project (PROJECT:bucket/key)`);
  return { project: m[1]!, bucket: m[2], key: m[3] ?? '' };
}

/** The remote with its project resolved to an id (a name looked up, '' the linked one). */
async function resolved(cli: Cli, remote: Remote): Promise<Remote> {
  return { ...remote, project: await cli.resolveProject(remote.project || undefined) };
}

/** Content types of common file extensions, for uploads that name none. */
const TYPES: Record<string, string> = {
  txt: 'text/plain', html: 'text/html', htm: 'text/html', css: 'text/css', csv: 'text/csv', md: 'text/markdown',
  js: 'text/javascript', mjs: 'text/javascript', json: 'application/json', xml: 'application/xml', pdf: 'application/pdf',
  zip: 'application/zip', gz: 'application/gzip', tar: 'application/x-tar', wasm: 'application/wasm',
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', svg: 'image/svg+xml', ico: 'image/x-icon',
  mp3: 'audio/mpeg', wav: 'audio/wav', mp4: 'video/mp4', webm: 'video/webm',
};

/** The content type a file name suggests, or undefined. */
export function typeOfName(name: string): string | undefined {
  const ext = /\.([A-Za-z0-9]+)$/.exec(name)?.[1]?.toLowerCase();
  return ext ? TYPES[ext] : undefined;
}

/** A progress bar on stderr when it is a terminal (and not `--json`); otherwise nothing. */
function progressBar(cli: Cli, label: string, total: number | null): { update(loaded: number): void; stop(): void } {
  if (!cli.io.stderr.isTTY || cli.out.json) return { update() {}, stop() {} };
  const bar = new cliProgress.SingleBar(
    {
      stream: cli.io.stderr as NodeJS.WritableStream,
      format: total === null ? `${label} {loadedMiB} MiB` : `${label} [{bar}] {percentage}% {loadedMiB}/{totalMiB} MiB | {eta_formatted}`,
      hideCursor: true,
      clearOnComplete: false,
    },
    cliProgress.Presets.shades_classic,
  );
  const mib = (n: number) => (n / 1048576).toFixed(1);
  bar.start(total ?? 0, 0, { loadedMiB: mib(0), totalMiB: mib(total ?? 0) });
  return {
    update: (loaded) => bar.update(Math.min(loaded, total ?? loaded), { loadedMiB: mib(loaded), totalMiB: mib(total ?? loaded) }),
    stop: () => bar.stop(),
  };
}

/**
 * Collects the chunks a copy has finished with every 16 MiB (docs/cli.md "Storage"). V8 counts a
 * chunk's bytes outside its heap, so a copy that allocates little else runs no collection until
 * tens of MiB of dead chunks have piled up: a 100 MiB download peaked 90 MiB above a small copy,
 * 70 MiB with this. The CLI's heap is small, so each collection costs a few milliseconds.
 */
function collector(): (loaded: number) => void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as ((options?: { type: 'minor' | 'major' }) => void) | undefined;
  let next = 16 * 1024 * 1024;
  return (loaded) => {
    if (!gc || loaded < next) return;
    next = loaded + 16 * 1024 * 1024;
    gc({ type: 'major' });
  };
}

/** The table of a project's buckets; `more` reads on. */
function bucketsView(more: string): ListView<Bucket> {
  return { field: 'buckets', head: ['name', 'created_at'], row: (b) => [b.name, b.created_at], more };
}

/** Registers the storage commands. */
export function register(program: Command, r: Registry): void {
  const storage = program.command('storage').description('object storage: buckets, listing, copying and removing objects');

  bucketCommands(storage, r);
  ls(storage, r);
  cp(storage, r);
  rm(storage, r);
}

/** `svc storage buckets list|create|delete`. */
function bucketCommands(storage: Command, r: Registry): void {
  const buckets = storage.command('buckets').description("a project's buckets");
  listOptions(buckets.command('list', { isDefault: true }).description("the project's buckets (the default)").argument('<project>', 'the project id')).action(
    r.action(async (cli, id: string, options: ListOptions) => {
      cli.failure.project = projectArg(id);
      await printList(cli, options, (c, page) => c.project(id).storage.listBuckets(page), bucketsView(`svc storage buckets list ${id}`));
    }),
  );
  buckets
    .command('create')
    .description('create a bucket (idempotent)')
    .argument('<project>', 'the project id')
    .argument('<bucket>', 'the bucket name: 3 to 63 of a-z, 0-9 and -')
    .action(
      r.action(async (cli, id: string, name: string) => {
        cli.failure.project = projectArg(id);
        const bucket = await cli.withSession((c) => c.project(id).storage.createBucket(name));
        cli.out.result(bucket, () => cli.out.fields({ ...bucket }));
      }),
    );

  buckets
    .command('delete')
    .description('delete an empty bucket; --force deletes its objects first')
    .argument('<project>', 'the project id')
    .argument('<bucket>', 'the bucket name')
    .option('--force', 'delete every object in it first (each receipted)')
    .action(
      r.action(async (cli, id: string, name: string, options: { force?: boolean }) => {
        cli.failure.project = projectArg(id);
        const bucket = await cli.withSession((c) => c.project(id).storage.deleteBucket(name, { force: !!options.force }));
        cli.out.result(bucket, () => cli.out.line(`deleted bucket ${bucket.name}`));
      }),
    );
}

/** `svc storage ls`: a project's buckets, or a bucket's objects and common prefixes. */
function ls(storage: Command, r: Registry): void {
  listOptions(
    storage
      .command('ls')
      .description("list a project's buckets (PROJECT) or a bucket's objects (PROJECT:bucket[/prefix])")
      .argument('[location]', 'PROJECT or PROJECT:bucket[/prefix] (PROJECT a name or an id; none, or :bucket, the linked one)')
      .option('--delimiter <d>', 'roll keys up at this after the prefix (S3 style), such as /'),
  ).action(
    r.action(async (cli, location: string | undefined, options: ListOptions & { delimiter?: string }) => {
      const parsed = location === undefined ? null : parseRemote(location);
      if (!parsed) {
        const id = await cli.resolveProject(location);
        await printList(cli, options, (c, page) => c.project(id).storage.listBuckets(page), bucketsView(`svc storage ls ${location ?? ''}`.trim()));
        return;
      }
      const remote = await resolved(cli, parsed);
      const prefix = remote.key || undefined;
      const { items, next_cursor, page } = await cli.withSession((c) =>
        readList(
          c.project(remote.project).storage.list(remote.bucket, { ...pageInput(options), ...(prefix ? { prefix } : {}), ...(options.delimiter ? { delimiter: options.delimiter } : {}) }),
          options,
          'objects',
        ),
      );
      const prefixes = (page.common_prefixes as string[] | undefined) ?? [];
      cli.out.result(page, () => {
        cli.out.table(
          ['key', 'size', 'content_type', 'state', 'updated_at'],
          [...prefixes.map((p) => [p, '', '(prefix)', '', '']), ...items.map((o) => [o.key, o.size, o.content_type, o.state, o.updated_at])],
        );
        moreNote(cli, next_cursor, `svc storage ls ${location}`);
      });
    }),
  );
}

/** `svc storage cp`: a file to an object or an object to a file, streamed. */
function cp(storage: Command, r: Registry): void {
  storage
    .command('cp')
    .description('copy a file to an object (cp FILE PROJECT:bucket/key) or an object to a file (cp PROJECT:bucket/key FILE); "-" is stdin or stdout')
    .argument('<source>', 'a file, "-", or PROJECT:bucket/key')
    .argument('<destination>', 'PROJECT:bucket/key (a key ending in "/" takes the file name), a file or directory, or "-"')
    .option('--content-type <type>', 'the stored content type (default: from the file name, else application/octet-stream)')
    .action(
      r.action(async (cli, source: string, destination: string, options: { contentType?: string }) => {
        const from = parseRemote(source);
        const to = parseRemote(destination);
        if (from && to) throw new UsageError('copying between two objects is not supported: copy through a file');
        if (!from && !to) throw new UsageError('one side must be an object: PROJECT:bucket/key');
        if (to) await upload(cli, source, await resolved(cli, to), options.contentType);
        else await download(cli, await resolved(cli, from!), destination);
      }),
    );
}

/** `svc storage rm`: one object. */
function rm(storage: Command, r: Registry): void {
  storage
    .command('rm')
    .description('remove an object (its row and its bytes)')
    .argument('<object>', 'PROJECT:bucket/key')
    .action(
      r.action(async (cli, spec: string) => {
        const parsed = parseRemote(spec);
        if (!parsed || !parsed.key) throw new UsageError(`${spec}: name the object as PROJECT:bucket/key`);
        const remote = await resolved(cli, parsed);
        const row = await cli.withSession((c) => c.project(remote.project).storage.delete(remote.bucket, remote.key));
        cli.out.result(row, () => cli.out.line(`removed ${remote.bucket}/${row.key} (${row.size} bytes)`));
      }),
    );
}

async function upload(cli: Cli, source: string, to: Remote, contentType: string | undefined): Promise<void> {
  cli.failure.project = to.project;
  let body: UploadBody;
  let name = 'stdin';
  if (source === '-') {
    body = Readable.toWeb(cli.io.stdin as Readable) as ReadableStream<Uint8Array>;
  } else {
    const stat = statOf(source);
    if (!stat.isFile()) throw new UsageError(`${source} is not a file`);
    // A Blob backed by the file: read as it is sent, with its size known up front.
    body = await openAsBlob(source);
    name = basename(source);
  }
  const key = !to.key || to.key.endsWith('/') ? `${to.key}${name}` : to.key;
  // A file over one request's limit goes as a resumable upload, whose URL is kept so that the same
  // command run again continues it (docs/cli.md "Storage").
  const resume: ResumeStore | null = source === '-' ? null : resumeStore(cli.dir, source, statOf(source), `${to.project}:${to.bucket}/${key}`, cli.baseUrl());
  const type = contentType ?? (source === '-' ? undefined : typeOfName(name));
  const total = body instanceof Blob ? body.size : null;
  const bar = progressBar(cli, `upload ${name}`, total);
  const collect = collector();
  let row;
  try {
    row = await cli.withSession((c) =>
      c.project(to.project).storage.upload(to.bucket, key, body, {
        ...(type ? { contentType: type } : {}),
        ...(resume ? { uploadUrl: resume.find(), onUploadUrl: (url: string) => resume.save(url) } : {}),
        onProgress: ({ loaded }) => {
          bar.update(loaded);
          collect(loaded);
        },
      }),
    );
  } finally {
    bar.stop();
  }
  resume?.forget();
  cli.out.result(row, () => cli.out.line(`${source === '-' ? 'stdin' : source} → ${to.project}:${to.bucket}/${row.key} (${row.size} bytes, etag ${row.etag})`));
}

async function download(cli: Cli, from: Remote, destination: string): Promise<void> {
  cli.failure.project = from.project;
  if (!from.key || from.key.endsWith('/')) throw new UsageError(`${from.project}:${from.bucket}/${from.key}: name the object to copy`);
  const got = await cli.withSession((c) => c.project(from.project).storage.download(from.bucket, from.key));
  if (!got.body) throw new CliError('the service answered no bytes');
  const toStdout = destination === '-';
  if (toStdout && cli.out.json) throw new UsageError('--json prints the result on stdout: copy to a file, not "-"');
  let target = destination;
  if (!toStdout && isDirectory(destination)) target = join(destination, basename(from.key));
  const bar = progressBar(cli, `download ${basename(from.key)}`, got.size);
  const collect = collector();
  let loaded = 0;
  const count = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      loaded += chunk.byteLength;
      bar.update(loaded);
      collect(loaded);
      done(null, chunk);
    },
  });
  const input = Readable.fromWeb(got.body as import('node:stream/web').ReadableStream<Uint8Array>);
  try {
    if (toStdout) {
      await pipeline(input, count, cli.io.stdout as NodeJS.WritableStream, { end: false });
    } else {
      // Written beside the target and renamed when complete: a failed copy leaves no half file.
      const temp = join(dirname(target), `.${basename(target)}.svc-${process.pid}.part`);
      try {
        await pipeline(input, count, createWriteStream(temp, { mode: 0o644 }));
        renameSync(temp, target);
      } catch (err) {
        rmSync(temp, { force: true });
        throw err;
      }
    }
  } finally {
    bar.stop();
  }
  if (toStdout) return;
  const result = { project: from.project, bucket: from.bucket, key: from.key, file: target, size: loaded, etag: got.etag, content_type: got.contentType };
  cli.out.result(result, () => cli.out.line(`${from.project}:${from.bucket}/${from.key} → ${target} (${loaded} bytes)`));
}

function statOf(path: string): import('node:fs').Stats {
  try {
    return statSync(path);
  } catch (err) {
    throw new CliError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
