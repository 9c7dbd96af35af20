/**
 * Drives an interactive command through a pseudo-terminal made by util-linux `script` (the `svc sql`
 * shell, docs/cli.md "The shell"): each line is typed once the command has answered the one before
 * (a prompt came back). Answers what the terminal showed, colours removed.
 */
import { spawn } from 'node:child_process';

/** The shell's prompts: statement, continuation, and an open transaction's. */
const PROMPTS = /svc> |txn> |\.\.\.> /g;

export function driveShell(command: string, lines: readonly string[], options: { env: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number }): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const child = spawn('script', ['-qfec', command, '/dev/null'], { cwd: options.cwd, env: { ...options.env, TERM: 'xterm' }, stdio: ['pipe', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (text += d));
    child.on('error', reject);
    child.on('close', () => {
      clearTimeout(timer);
      resolve(text.replace(/\x1b\[[0-9;]*[A-Za-z]/g, ''));
    });
    let sent = 0;
    const feed = setInterval(() => {
      const prompts = (text.match(PROMPTS) ?? []).length;
      if (prompts > sent && sent < lines.length) child.stdin.write(`${lines[sent++]}\r`);
      if (sent === lines.length) clearInterval(feed);
    }, 30);
    const timer = setTimeout(() => {
      clearInterval(feed);
      child.kill();
    }, options.timeoutMs ?? 20_000);
  });
}
