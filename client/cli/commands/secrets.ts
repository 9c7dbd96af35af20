/**
 * `svc secrets set|list|rm` and `svc receipts` (docs/secrets.md; docs/api.md "Receipts"). A secret's
 * value is read from stdin or a prompt that does not echo it, never from an argument, and is never
 * printed.
 */
import type { Command } from 'commander';
import { readSecret } from '../input.ts';
import type { Registry } from '../program.ts';
import { projectArg, PROJECT_HELP } from './args.ts';
import { listOptions, printList, type ListOptions } from './lists.ts';

/** Registers the secrets and receipts commands. */
export function register(program: Command, r: Registry): void {
  const secrets = program.command('secrets').description("a project's function secrets (values go in, never come out)");

  secrets
    .command('set')
    .description('create or rotate a secret; the value is read from stdin or a hidden prompt')
    .argument('<project>', PROJECT_HELP)
    .argument('<name>', 'the name: A-Z, 0-9 and _, starting with a letter')
    .action(
      // A third argument (the value) is refused by commander: values never travel as arguments.
      r.action(async (cli, id: string, name: string) => {
        cli.failure.project = projectArg(id);
        const value = await readSecret(cli.io, `value of ${name}: `);
        const meta = await cli.withSession((c) => c.project(id).secrets.set(name, value));
        cli.out.result(meta, () => cli.out.line(`${meta.version === 1 ? 'created' : 'rotated'} ${meta.name} (version ${meta.version})`));
      }),
    );

  listOptions(secrets.command('list').description('names and versions of the secrets').argument('<project>', PROJECT_HELP)).action(
    r.action(async (cli, id: string, options: ListOptions) => {
      cli.failure.project = projectArg(id);
      await printList(cli, options, (c, page) => c.project(id).secrets.list(page), {
        field: 'secrets',
        head: ['name', 'version', 'updated_at'],
        row: (s) => [s.name, s.version, s.updated_at],
        more: `svc secrets list ${id}`,
      });
    }),
  );

  secrets
    .command('rm')
    .description('delete a secret')
    .argument('<project>', PROJECT_HELP)
    .argument('<name>', 'the secret name')
    .action(
      r.action(async (cli, id: string, name: string) => {
        cli.failure.project = projectArg(id);
        const meta = await cli.withSession((c) => c.project(id).secrets.delete(name));
        cli.out.result(meta, () => cli.out.line(`deleted ${meta.name}`));
      }),
    );

  listOptions(program.command('receipts').description('receipts of receipted changes, newest first').argument('<project>', PROJECT_HELP)).action(
    r.action(async (cli, id: string, options: ListOptions) => {
      cli.failure.project = projectArg(id);
      await printList(cli, options, (c, page) => c.project(id).receipts.list(page), {
        field: 'receipts',
        head: ['at', 'op', 'target', 'actor', 'request_id'],
        row: (x) => [x.at, x.op, x.target, x.actor, x.request_id],
        more: `svc receipts ${id}`,
      });
    }),
  );
}
