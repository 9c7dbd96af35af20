/** The `svc` CLI's entry (bin/svc starts it; docs/cli.md). */
import { run } from './program.ts';

process.exitCode = await run(process.argv.slice(2), { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr }, process.env);
