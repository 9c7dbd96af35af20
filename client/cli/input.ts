/**
 * Reading what must not be an argument (docs/cli.md "Secrets"): a value piped on stdin, or typed at a
 * prompt that does not echo it. Arguments end up in shell history and process listings; these do not.
 */
import { CliError } from './errors.ts';
import type { Io } from './context.ts';

/** All of stdin as text (for a value piped in). */
export async function readStdin(stdin: Io['stdin']): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * A secret value: piped on stdin (one trailing newline removed, as `echo` adds one), or typed at a
 * prompt on a terminal without being shown.
 */
export async function readSecret(io: Io, prompt: string): Promise<string> {
  if (!io.stdin.isTTY) {
    const text = await readStdin(io.stdin);
    return text.replace(/\r?\n$/, '');
  }
  return promptHidden(io, prompt);
}

/** A line typed at a prompt, echoed (an account id, say); stdin when it is not a terminal. */
export async function readLine(io: Io, prompt: string): Promise<string> {
  if (!io.stdin.isTTY) return (await readStdin(io.stdin)).split(/\r?\n/)[0] ?? '';
  const { createInterface } = await import('node:readline/promises');
  const rl = createInterface({ input: io.stdin, output: io.stderr, terminal: true });
  try {
    return await rl.question(prompt);
  } finally {
    rl.close();
  }
}

/** Reads a line on a terminal in raw mode, echoing nothing; Ctrl-C cancels. */
export function promptHidden(io: Io, prompt: string): Promise<string> {
  const { stdin, stderr } = io;
  if (!stdin.setRawMode) throw new CliError('cannot read a hidden value from this terminal', 'pipe the value on stdin');
  stderr.write(prompt);
  stdin.setRawMode(true);
  stdin.resume();
  return new Promise((resolve, reject) => {
    let value = '';
    const finish = (err?: Error) => {
      stdin.removeListener('data', onData);
      stdin.setRawMode!(false);
      stdin.pause();
      stderr.write('\n');
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (data: Buffer | string) => {
      for (const ch of typeof data === 'string' ? data : data.toString('utf8')) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') return finish();
        if (ch === '\u0003') return finish(new CliError('cancelled'));
        if (ch === '\u007f' || ch === '\b') value = [...value].slice(0, -1).join('');
        else if (ch >= ' ' || ch === '\t') value += ch;
      }
    };
    stdin.on('data', onData);
  });
}
