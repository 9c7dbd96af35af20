/** `svc keys create|list|revoke` (the interface contract "Project key", "Key states"; docs/dataplane.md "Keys"). */
import type { Command } from 'commander';
import type { Registry } from '../program.ts';
import { projectArg, PROJECT_HELP } from './args.ts';
import { listOptions, printList, type ListOptions } from './lists.ts';

/** Registers the key commands. */
export function register(program: Command, r: Registry): void {
  const keys = program.command('keys').description("a project's keys for the data plane (/v2) and realtime");

  keys
    .command('create')
    .description('issue a key; its secret is shown this once')
    .argument('<project>', PROJECT_HELP)
    .option('--label <label>', 'a label, at most 64 characters')
    .action(
      r.action(async (cli, id: string, options: { label?: string }) => {
        cli.failure.project = projectArg(id);
        const issued = await cli.withSession((c) => c.project(id).keys.create(options.label === undefined ? {} : { label: options.label }));
        cli.out.result(issued, () => {
          cli.out.fields({ key_id: issued.key_id, label: issued.label, created_at: issued.created_at });
          cli.out.line(`key (shown once): ${issued.key}`);
        });
      }),
    );

  listOptions(keys.command('list').description('every key, revoked ones included; never a secret').argument('<project>', PROJECT_HELP)).action(
    r.action(async (cli, id: string, options: ListOptions) => {
      cli.failure.project = projectArg(id);
      await printList(cli, options, (c, page) => c.project(id).keys.list(page), {
        field: 'keys',
        head: ['key_id', 'label', 'created_at', 'revoked_at'],
        row: (k) => [k.key_id, k.label, k.created_at, k.revoked_at],
        more: `svc keys list ${id}`,
      });
    }),
  );

  keys
    .command('revoke')
    .description('revoke a key: the very next /v2 request with it is refused')
    .argument('<project>', PROJECT_HELP)
    .argument('<key_id>', 'the key id (32 hex)')
    .action(
      r.action(async (cli, id: string, keyId: string) => {
        cli.failure.project = projectArg(id);
        const key = await cli.withSession((c) => c.project(id).keys.revoke(keyId));
        cli.out.result(key, () => cli.out.fields({ ...key }));
      }),
    );
}
