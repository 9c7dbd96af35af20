/**
 * `node infra/local/tether.ts -- <program> [args...]`: runs a program that cannot watch a pipe
 * itself (DynamoDB Local's java) so that it dies with the local stack's supervisor
 * (docs/local-stack.md "Processes"). The tether's stdin is a pipe from the supervisor: end of file
 * means the supervisor is gone, however it ended, and the program is stopped (SIGTERM, then SIGKILL
 * after a grace). SIGTERM/SIGINT to the tether stop it the same way. The tether exits with the
 * program's status. The program stays in the tether's process group, so killing that group kills both.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';

const GRACE_MS = 5_000;

const argv = process.argv.slice(2);
if (argv[0] === '--') argv.shift();
if (argv.length === 0) {
  console.error('usage: node infra/local/tether.ts -- <program> [args...]');
  process.exit(2);
}

const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'inherit', 'inherit'] });
let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  setTimeout(() => child.kill('SIGKILL'), GRACE_MS).unref();
};
child.once('error', (err) => {
  console.error(`tether: cannot run ${argv[0]}: ${err.message}`);
  process.exit(127);
});
child.once('exit', (code, signal) => {
  process.exit(code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0));
});
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.on('error', stop);
process.stdin.resume();
