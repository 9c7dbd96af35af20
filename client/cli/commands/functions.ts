/** `svc functions …`: registered once the service has function routes (docs/cli.md "Functions"). */
import type { Command } from 'commander';
import type { Registry } from '../program.ts';

/** Registers the function commands. */
export function register(_program: Command, _r: Registry): void {}
