/**
 * `svc link [PROJECT]` and `svc unlink` (docs/cli.md "Projects by name, and linked directories"):
 * the directory's default project, kept in `.svc/project.json` beside the code, as `vercel link`
 * keeps `.vercel/project.json`; every command that takes a project uses it when given none.
 */
import { rmSync } from 'node:fs';
import type { Command } from 'commander';
import { ID_PATTERNS } from '../../../shared/ids.ts';
import type { Project } from '../../types.ts';
import type { Cli } from '../context.ts';
import { CliError, UsageError } from '../errors.ts';
import { readLine } from '../input.ts';
import type { Registry } from '../program.ts';
import { projectByName, projectRefArg, writeLink } from '../project-ref.ts';

/** Registers `link` and `unlink`. */
export function register(program: Command, r: Registry): void {
  program
    .command('link')
    .description('link this directory to a project: commands given no project use it (kept in .svc/project.json)')
    .argument('[name-or-id]', 'the project: a name or an id (on a terminal, none: choose from a list)')
    .action(
      r.action(async (cli, ref: string | undefined) => {
        const project = await chosen(cli, ref ?? cli.projectOption);
        const file = writeLink(cli.cwd, { project_id: project.id, name: project.name, base_url: cli.baseUrl() });
        cli.failure.project = project.id;
        cli.out.result({ project_id: project.id, name: project.name, base_url: cli.baseUrl(), file }, () => {
          cli.out.line(`Linked ${cli.cwd} to ${cli.out.c.bold(project.id)} (${project.name}) on ${cli.baseUrl()}`);
          cli.out.note(cli.out.ce.dim(`kept in ${file}; commands given no project use it (\`svc unlink\` forgets it)`));
        });
      }),
    );

  program
    .command('unlink')
    .description("forget this directory's linked project")
    .action(
      r.action(async (cli) => {
        const found = cli.link();
        if (found) rmSync(found.file);
        cli.out.result({ unlinked: found?.link.project_id ?? null, file: found?.file ?? null }, () => {
          cli.out.line(found ? `Unlinked ${found.link.project_id} (${found.file} removed)` : 'No linked project here');
        });
      }),
    );
}

/** The project to link: by id or name, or chosen at a prompt from the account's projects. */
async function chosen(cli: Cli, ref: string | undefined): Promise<Project> {
  if (ref !== undefined) {
    const checked = projectRefArg(ref);
    const id = ID_PATTERNS.prj.test(checked) ? checked : await cli.withSession((c) => projectByName(c, checked));
    // Read it: an id of no project of the account is refused here, not at the next command.
    return cli.withSession((c) => c.projects.get(id));
  }
  if (!cli.io.stdin.isTTY || cli.out.json) throw new UsageError('name the project to link: `svc link PROJECT` (a name or an id)');
  const projects = await cli.withSession((c) => c.projects.list({ limit: 1000 }).all());
  if (projects.length === 0) throw new CliError('the account has no project yet', 'create one: `svc projects create NAME`');
  projects.forEach((p, i) => cli.out.note(`${String(i + 1).padStart(3)}  ${p.id}  ${p.name}`));
  const answer = (await readLine(cli.io, 'link which project (number, name or id)? ')).trim();
  const index = /^\d+$/.test(answer) ? Number(answer) - 1 : -1;
  const pick = projects[index] ?? projects.find((p) => p.id === answer) ?? projects.filter((p) => p.name === answer);
  if (Array.isArray(pick)) {
    if (pick.length === 1) return pick[0]!;
    throw new CliError(pick.length === 0 ? `no project ${JSON.stringify(answer)} in the list` : `several projects are named "${answer}": give the id`);
  }
  return pick;
}
