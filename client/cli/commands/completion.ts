/** `svc completion bash|zsh|fish` (docs/cli.md "Shell completion"): a script made from the command tree. */
import type { Command } from 'commander';
import { bashScript, commandTree, fishScript, zshScript } from '../completion.ts';
import { UsageError } from '../errors.ts';
import type { Registry } from '../program.ts';

const SHELLS = { bash: bashScript, zsh: zshScript, fish: fishScript } as const;

/** Registers `completion`. */
export function register(program: Command, r: Registry): void {
  program
    .command('completion')
    .description('print the completion script of a shell: source <(svc completion bash), or zsh; svc completion fish | source')
    .argument('<shell>', 'bash, zsh or fish')
    .action(
      r.action(async (cli, shell: string) => {
        const make = SHELLS[shell as keyof typeof SHELLS];
        if (!make || !Object.hasOwn(SHELLS, shell)) throw new UsageError(`SHELL must be bash, zsh or fish (got ${JSON.stringify(shell)})`);
        cli.io.stdout.write(make(commandTree(program)));
      }),
    );
}
