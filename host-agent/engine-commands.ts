/**
 * The engine commands the agent runs (docs/engine.md "CLI"; docs/architecture.md "Adding an engine
 * command"), one declaration each: the command's name, how its typed arguments become the engine's
 * argv, and the schema of the JSON document it prints, from which its result type is inferred. The
 * agent runs a command only through its declaration (`Engines.run` in host-agent/tenants/engine.ts,
 * the pin check in ./engine-cli.ts, the serve process in host-agent/tenants/processes.ts), so a call
 * site cannot pass the wrong arguments or read a field the contract does not promise: a document
 * that lacks one is the engine's failure (502 `upstream_unavailable`, named in the tenant log).
 *
 * The schemas hold the fields the agent relies on; a document may carry more (they are kept, and
 * answered where the agent answers the whole document, as head and restore do).
 */
import { z } from 'zod';
import { snapshotBackupSchema, snapshotLineageSchema } from '../shared/schemas/snapshots.ts';

/** One engine command of the contract. */
export interface EngineCommand<Args, Result> {
  /** The command's name, its argv's first word (and its name in the tenant log). */
  readonly name: string;
  /** The argv after the engine binary. */
  argv(args: Args): string[];
  /** Its document on stdout (`--json`; for `serve`, the ready line). */
  readonly result: z.ZodType<Result>;
}

/** The arguments of a declared command. */
export type ArgsOf<C> = C extends EngineCommand<infer A, unknown> ? A : never;
/** The result of a declared command. */
export type ResultOf<C> = C extends EngineCommand<unknown, infer R> ? R : never;

function command<Args, Result>(name: string, argv: (args: Args) => string[], result: z.ZodType<Result>): EngineCommand<Args, Result> {
  return { name, argv: (args) => [name, ...argv(args)], result };
}

/** `version --json`: which engine this is (contract "Versioning"). */
export const versionCommand = command('version', () => ['--json'], z.looseObject({ engine_version: z.string() }));

/** `init --data-dir D --json`: a fresh data directory. */
export const initCommand = command(
  'init',
  (a: { dataDir: string }) => ['--data-dir', a.dataDir, '--json'],
  z.looseObject({ status: z.literal('initialized'), directory_lineage: z.string() }),
);

/** `status --data-dir D --json`: the lineage figures of a data directory (also a probe of its lock). */
export const statusCommand = command(
  'status',
  (a: { dataDir: string }) => ['--data-dir', a.dataDir, '--json'],
  // The fields a snapshot records as its `lineage` (the interface contract "Snapshot").
  z.looseObject(snapshotLineageSchema.shape),
);

/** `backup --data-dir D --out B --json`: a verified backup of a data directory. */
export const backupCommand = command(
  'backup',
  (a: { dataDir: string; out: string }) => ['--data-dir', a.dataDir, '--out', a.out, '--json'],
  // The fields a snapshot records as its `backup` (the interface contract "Snapshot").
  z.looseObject(snapshotBackupSchema.shape),
);

/**
 * `verify --backup B --json`: the verification `backup` and `restore` run, on a backup directory that
 * came from outside (an imported archive, an off-machine copy; docs/lifecycle.md "Export and import").
 */
export const verifyCommand = command(
  'verify',
  (a: { backup: string }) => ['--backup', a.backup, '--json'],
  z.looseObject({
    status: z.literal('verified'),
    backup_path: z.string(),
    checkpoint_digest: z.string(),
    file_count: z.int(),
    total_bytes: z.int(),
    visible_csn: z.int(),
    directory_lineage: z.string(),
  }),
);

/** `restore --backup B --target T --json`: a backup restored into a fresh directory. */
export const restoreCommand = command(
  'restore',
  (a: { backup: string; target: string }) => ['--backup', a.backup, '--target', a.target, '--json'],
  z.looseObject({ status: z.literal('restored') }),
);

/** `serve …`: the long-running engine; its document is the ready line, the first line of its stdout. */
export const serveCommand = command(
  'serve',
  (a: {
    dataDir: string;
    host: string;
    port: number;
    /** The engine's request-body limit: the data plane's, so the agent's 413 is the one that applies. */
    maxBodyBytes: number;
    /** The engine's statement time limit (`SVCD_ENGINE_STATEMENT_TIMEOUT_MS`, docs/engine.md "Statement time limit"). */
    statementTimeoutMs: number;
  }) => [
    '--data-dir',
    a.dataDir,
    '--listen',
    `${a.host}:${a.port}`,
    '--max-body-bytes',
    String(a.maxBodyBytes),
    '--statement-timeout-ms',
    String(a.statementTimeoutMs),
  ],
  z.looseObject({ ready: z.literal(true), listen: z.string(), pid: z.number() }),
);

/**
 * The result of `cmd` from the document it printed, or why not: the first field it lacks, as the
 * tenant log and the 502 name it (`the engine's status output lacks a valid root_digest`).
 */
export function parseResult<R>(cmd: EngineCommand<unknown, R>, document: unknown): { ok: true; value: R } | { ok: false; problem: string } {
  const parsed = cmd.result.safeParse(document);
  if (parsed.success) return { ok: true, value: parsed.data };
  const path = parsed.error.issues[0]?.path.join('.') || 'document';
  return { ok: false, problem: `the engine's ${cmd.name} output lacks a valid ${path}` };
}
