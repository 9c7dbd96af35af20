/** The options and printing every list command shares (docs/cli.md "Lists"). */
import type { Command } from 'commander';
import type { AnyPage, Pages } from '../../pages.ts';
import type { Cli } from '../context.ts';
import { limitArg } from './args.ts';

/** The list options, as parsed. */
export interface ListOptions {
  limit?: string;
  cursor?: string;
  all?: boolean;
}

/** Adds `--limit`, `--cursor` and `--all` to a list command. */
export function listOptions(command: Command): Command {
  return command
    .option('--limit <n>', 'items per page, 1 to 1000 (default 100)')
    .option('--cursor <cursor>', 'start at this next_cursor of an earlier page')
    .option('--all', 'read every page');
}

/** The paging input of the options (`--limit`, `--cursor`). */
export function pageInput(options: ListOptions): { limit?: number; cursor?: string } {
  const limit = limitArg(options.limit);
  return { ...(limit === undefined ? {} : { limit }), ...(options.cursor ? { cursor: options.cursor } : {}) };
}

/**
 * The page a list command prints, as answered (with `--all`, every page joined under `field`),
 * with its items.
 */
export async function readList<P extends AnyPage, T>(
  pages: Pages<P, T>,
  options: ListOptions,
  field: string,
): Promise<{ items: T[]; next_cursor: string | null; page: Record<string, unknown> }> {
  if (!options.all) {
    const page = await pages.first();
    return { items: pages.itemsOf(page), next_cursor: page.next_cursor, page: page as unknown as Record<string, unknown> };
  }
  const items = await pages.all();
  return { items, next_cursor: null, page: { [field]: items, next_cursor: null } };
}

/** Says how to read on when a page was not the last (human output). */
export function moreNote(cli: Cli, nextCursor: string | null, command: string): void {
  if (nextCursor) cli.out.note(cli.out.ce.dim(`more: ${command} --cursor ${nextCursor}   (or --all)`));
}
