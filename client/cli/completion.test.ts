/** Completion scripts made from the command tree (client/cli/completion.ts), run by bash. */
import { spawnSync } from 'node:child_process';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { bashScript, commandTree, fishScript, zshScript } from './completion.ts';

function program(): Command {
  const p = new Command('svc').option('--json', 'JSON').option('--profile <name>', 'profile');
  p.command('link').description('link');
  const f = p.command('functions').description('functions');
  f.command('deploy').description('deploy it').option('--timeout-ms <ms>', 'timeout');
  f.command('dev').description('serve: locally');
  return p;
}

/** What bash offers after `words` (the last one being completed). */
function complete(words: string[]): string[] {
  const script = `${bashScript(commandTree(program()))}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _svc; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const run = spawnSync('bash', ['-c', script], { encoding: 'utf8', cwd: '/' });
  expect(run.status, run.stderr).toBe(0);
  return run.stdout.split('\n').filter(Boolean);
}

describe('completion', () => {
  it('offers the subcommands and options of the command typed so far (bash)', () => {
    expect(complete(['svc', ''])).toEqual(expect.arrayContaining(['link', 'functions', '--json', '--profile', '--help']));
    expect(complete(['svc', 'functions', 'd'])).toEqual(['deploy', 'dev']);
    expect(complete(['svc', '--json', 'functions', 'deploy', '--t'])).toEqual(['--timeout-ms']);
  });

  it('writes zsh and fish scripts from the same tree, descriptions included', () => {
    const tree = commandTree(program());
    expect(zshScript(tree)).toContain("('functions') items=('deploy:deploy it' 'dev:serve: locally'");
    expect(zshScript(tree)).toContain('compdef _svc svc');
    expect(fishScript(tree)).toContain("complete -c svc -n '__svc_at functions' -a 'deploy' -d 'deploy it'");
    expect(fishScript(tree)).toContain("complete -c svc -n '__svc_at functions deploy' -l timeout-ms -d 'timeout'");
  });
});
