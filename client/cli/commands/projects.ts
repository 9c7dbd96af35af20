/**
 * `svc projects create|list|get|rename|update|relocate|delete` (the interface contract "POST /v0/projects", "GET
 * /v0/projects/{id}"; the automatic sleep and backups: docs/lifecycle.md "Automatic sleep and backups").
 */
import type { Command } from 'commander';
import type { Project } from '../../types.ts';
import type { Cli } from '../context.ts';
import { CliError, UsageError } from '../errors.ts';
import { readLine } from '../input.ts';
import type { Registry } from '../program.ts';
import { projectArg, PROJECT_HELP } from './args.ts';
import { listOptions, printList, type ListOptions } from './lists.ts';
import { changesOf, describeAutoSleep, describeBackup, describeLastBackup, formatSeconds, type UpdateOptions } from './project-settings.ts';

/** Prints one project (human output). */
export function printProject(cli: Cli, project: Project): void {
  const c = cli.out.c;
  const state = project.state === 'running' ? c.green(project.state) : project.state === 'sleeping' ? c.yellow(project.state) : project.state;
  cli.out.fields({
    id: project.id,
    name: project.name,
    state,
    created_at: project.created_at,
    updated_at: project.updated_at,
    engine: `${project.native.pin} (data plane ${project.native.data_plane})`,
    agent: project.agent_id,
    ...(project.restored_from ? { restored_from: `${project.restored_from.snapshot_id ?? 'no snapshot (data lost)'} after agent ${project.restored_from.lost_agent} was lost, ${project.restored_from.at}` } : {}),
    auto_sleep: describeAutoSleep(project),
    backup: describeBackup(project),
    last_backup: describeLastBackup(project),
  });
}

/** Registers the project commands. */
export function register(program: Command, r: Registry): void {
  const projects = program.command('projects').description('create, list and read projects');
  createAndList(projects, r);
  change(projects, r);
  removeAndRead(projects, r);
}

/** `svc projects create` and `svc projects list`. */
function createAndList(projects: Command, r: Registry): void {
  projects
    .command('create')
    .description('create a project: it reserves a tenant and does not start the engine')
    .argument('<name>', 'the project name (1 to 64 characters)')
    .option('--from-snapshot <snapshot_id>', 'a fork: the new project starts with this snapshot of one of your projects (docs/durability.md "Fork")')
    .action(
      r.action(async (cli, name: string, options: { fromSnapshot?: string }) => {
        const input = options.fromSnapshot === undefined ? { name } : { name, from_snapshot: options.fromSnapshot };
        const project = await cli.withSession((c) => c.projects.create(input));
        cli.failure.project = project.id;
        cli.out.result(project, () => {
          printProject(cli, project);
          cli.out.note(cli.out.ce.dim(`next: svc wakeup ${project.id}`));
        });
      }),
    );

  listOptions(projects.command('list').description("the account's projects")).action(
    r.action(async (cli, options: ListOptions) => {
      await printList(cli, options, (c, page) => c.projects.list(page), {
        field: 'projects',
        head: ['id', 'name', 'state', 'created_at', 'auto_sleep', 'backup', 'last_backup'],
        row: (p) => [
          p.id,
          p.name,
          p.state,
          p.created_at,
          p.auto_sleep_after_s === null ? 'off' : formatSeconds(p.auto_sleep_after_s),
          p.backup?.on_sleep ? `keep ${p.backup.keep}` : 'off',
          p.last_backup_at === null ? (p.last_backup_offsite ?? '') : `${p.last_backup_at} (${p.last_backup_offsite})`,
        ],
        more: 'svc projects list',
      });
    }),
  );
}

/** `svc projects rename` and `svc projects update` (the name, the automatic sleep and backups). */
function change(projects: Command, r: Registry): void {
  projects
    .command('rename')
    .description('give the project a new name')
    .argument('<project>', PROJECT_HELP)
    .argument('<name>', 'the new name (1 to 64 characters)')
    .action(
      r.action(async (cli, id: string, name: string) => {
        cli.failure.project = projectArg(id);
        const project = await cli.withSession((c) => c.project(id).rename(name));
        cli.out.result(project, () => printProject(cli, project));
      }),
    );

  projects
    .command('relocate')
    .description('move the sleeping project to another host agent (docs/durability.md "Relocation")')
    .argument('<project>', PROJECT_HELP)
    .option('--to <agent_id>', 'the agent to move to (default: the least-loaded other live agent)')
    .action(
      r.action(async (cli, id: string, options: { to?: string }) => {
        cli.failure.project = projectArg(id);
        const project = await cli.withSession((c) => c.project(id).relocate(options.to));
        cli.out.result(project, () => printProject(cli, project));
      }),
    );

  projects
    .command('update')
    .description('change the name, the automatic sleep or the automatic backups of the project')
    .argument('<project>', PROJECT_HELP)
    .option('--name <name>', 'a new name (1 to 64 characters)')
    .option('--auto-sleep <duration>', 'sleep the engine after this long without /v2 traffic: 90s, 10m, 2h, 1d; off: never')
    .option('--backup <on|off>', 'on: a snapshot at each sleep that follows writes, copied off the machine; off: none')
    .option('--backup-keep <n>', 'how many automatic snapshots to keep, 1 to 100 (default 7; implies --backup on)')
    .action(
      r.action(async (cli, id: string, options: UpdateOptions) => {
        cli.failure.project = projectArg(id);
        const changes = changesOf(options);
        const project = await cli.withSession((c) => c.project(id).update(changes));
        cli.out.result(project, () => printProject(cli, project));
      }),
    );
}

/** `svc projects delete` and `svc projects get` (or `show`). */
function removeAndRead(projects: Command, r: Registry): void {
  projects
    .command('delete')
    .description('stop the engine and delete the project with its keys, storage, snapshots, secrets, functions and data')
    .argument('<project>', PROJECT_HELP)
    .option('--yes', 'do not ask (required when stdin is not a terminal)')
    .action(
      r.action(async (cli, id: string, options: { yes?: boolean }) => {
        cli.failure.project = projectArg(id);
        if (!options.yes) {
          if (!cli.io.stdin.isTTY) throw new UsageError('deleting a project cannot be undone: pass --yes');
          const answer = await readLine(cli.io, `delete ${id} and everything in it? type the project id to confirm: `);
          if (answer.trim() !== id) throw new CliError('not deleted');
        }
        const project = await cli.withSession((c) => c.project(id).delete());
        cli.out.result(project, () => cli.out.line(`deleted ${project.id} (${project.name})`));
      }),
    );

  projects
    .command('get')
    .alias('show')
    .description('one project, its state reconciled with the live engine, its settings and its recovery point')
    .argument('<project>', PROJECT_HELP)
    .action(
      r.action(async (cli, id: string) => {
        cli.failure.project = projectArg(id);
        const project = await cli.withSession((c) => c.projects.get(id));
        cli.out.result(project, () => printProject(cli, project));
      }),
    );
}
