/**
 * Shell completion scripts generated from the commander tree (docs/cli.md "Shell completion"), so a
 * command added to the CLI completes without a change here. Each script finds the command path typed
 * so far (the words that are subcommands, options skipped) and offers that command's subcommands and
 * options, else files.
 */
import type { Command } from 'commander';

/** One command of the tree: its path, subcommands and options, with their descriptions. */
interface Node {
  path: string;
  subs: { name: string; description: string }[];
  options: { flag: string; description: string }[];
}

/** Every command of `program`, depth first; the global options are offered everywhere. */
export function commandTree(program: Command): Node[] {
  const globals = program.options.map((o) => o.long ?? o.short ?? '').filter(Boolean);
  const nodes: Node[] = [];
  const visit = (c: Command, path: string[]) => {
    const own = c === program ? [] : c.options.map((o) => ({ flag: o.long ?? o.short ?? '', description: o.description }));
    // --version belongs to `svc` alone; the other global options go with every command.
    const global = program.options
      .filter((o) => globals.includes(o.long ?? '') && (c === program || o.long !== '--version'))
      .map((o) => ({ flag: o.long!, description: o.description }));
    nodes.push({
      path: path.join(' '),
      subs: c.commands.filter((s) => s.name() !== 'help').map((s) => ({ name: s.name(), description: s.description() })),
      options: [...own, ...global, { flag: '--help', description: 'show help' }].filter((o) => o.flag),
    });
    for (const s of c.commands) visit(s, [...path, s.name()]);
  };
  visit(program, []);
  return nodes;
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The script for bash (also read by zsh's bashcompinit). */
export function bashScript(nodes: Node[]): string {
  const subs = nodes.map((n) => `    ${quote(n.path)}) echo ${quote(n.subs.map((s) => s.name).join(' '))} ;;`).join('\n');
  const words = nodes.map((n) => `    ${quote(n.path)}) echo ${quote([...n.subs.map((s) => s.name), ...n.options.map((o) => o.flag)].join(' '))} ;;`).join('\n');
  return `# svc completion for bash. Load it with: source <(svc completion bash)
# (or write it to ~/.local/share/bash-completion/completions/svc)
_svc_subs() {
  case "$1" in
${subs}
  esac
}
_svc_words() {
  case "$1" in
${words}
  esac
}
_svc() {
  local cur=\${COMP_WORDS[COMP_CWORD]} path= w i
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=\${COMP_WORDS[i]}
    [[ $w == -* ]] && continue
    if [[ " $(_svc_subs "$path") " == *" $w "* ]]; then path=\${path:+$path }$w; fi
  done
  COMPREPLY=($(compgen -W "$(_svc_words "$path")" -- "$cur"))
  if [[ \${#COMPREPLY[@]} -eq 0 ]]; then COMPREPLY=($(compgen -f -- "$cur")); fi
}
complete -o default -F _svc svc
`;
}

/** The script for zsh: subcommands and options with their descriptions. */
export function zshScript(nodes: Node[]): string {
  const esc = (s: string) => s.replace(/:/g, '\\:');
  const subs = nodes.map((n) => `    (${quote(n.path)}) print -r -- ${quote(n.subs.map((s) => s.name).join(' '))} ;;`).join('\n');
  const items = nodes
    .map((n) => {
      const all = [...n.subs.map((s) => `${esc(s.name)}:${s.description}`), ...n.options.map((o) => `${esc(o.flag)}:${o.description}`)];
      return `    (${quote(n.path)}) items=(${all.map(quote).join(' ')}) ;;`;
    })
    .join('\n');
  return `#compdef svc
# svc completion for zsh. Load it after compinit with: source <(svc completion zsh)
# (or write it as _svc into a directory of $fpath)
_svc_subs() {
  case "$1" in
${subs}
  esac
}
_svc() {
  local -a seen items
  local w i p
  for ((i = 2; i < CURRENT; i++)); do
    w=\${words[i]}
    [[ $w == -* ]] && continue
    p=\${(j: :)seen}
    if [[ " $(_svc_subs "$p") " == *" $w "* ]]; then seen+=($w); fi
  done
  p=\${(j: :)seen}
  case "$p" in
${items}
  esac
  _describe -t commands svc items && return
  _files
}
compdef _svc svc
`;
}

/** The script for fish. */
export function fishScript(nodes: Node[]): string {
  const esc = (s: string) => quote(s);
  const subs = nodes.map((n) => `    case ${quote(n.path)}\n      printf '%s\\n' ${n.subs.map((s) => quote(s.name)).join(' ') || "''"}`).join('\n');
  const lines: string[] = [];
  for (const n of nodes) {
    const at = `'__svc_at ${n.path.replace(/'/g, '')}'`;
    for (const s of n.subs) lines.push(`complete -c svc -n ${at} -a ${esc(s.name)} -d ${esc(s.description)}`);
    for (const o of n.options) {
      const flag = o.flag.startsWith('--') ? `-l ${o.flag.slice(2)}` : `-s ${o.flag.slice(1)}`;
      lines.push(`complete -c svc -n ${at} ${flag} -d ${esc(o.description)}`);
    }
  }
  return `# svc completion for fish. Load it with: svc completion fish | source
# (or write it to ~/.config/fish/completions/svc.fish)
function __svc_subs
  switch "$argv[1]"
${subs}
  end
end
function __svc_path
  set -l words (commandline -opc)
  set -e words[1]
  set -l path
  for w in $words
    string match -q -- '-*' $w; and continue
    if contains -- $w (__svc_subs (string join ' ' $path))
      set path $path $w
    end
  end
  string join ' ' $path
end
function __svc_at
  test (__svc_path | string collect) = (string join ' ' $argv | string collect)
end
${lines.join('\n')}
`;
}
