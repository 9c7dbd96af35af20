/** The options and printing every list command shares (docs/cli.md "Lists"). */
import type { Command } from 'commander';
import type { SvcClient } from '../../client.ts';
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

/** How a list command prints its items (human output). */
export interface ListView<T> {
  /** The answer's field the items are under (with `--all`, every page's items are joined under it). */
  field: string;
  head: string[];
  row(item: T): unknown[];
  /** The command that reads on, printed with the next cursor. */
  more: string;
}

/** Reads the page (or with `--all` every page) that `read` lists with the session, and prints it. */
export async function printList<P extends AnyPage, T>(cli: Cli, options: ListOptions, read: (client: SvcClient, page: { limit?: number; cursor?: string }) => Pages<P, T>, view: ListView<T>): Promise<void> {
  const { items, next_cursor, page } = await cli.withSession((c) => readList(read(c, pageInput(options)), options, view.field));
  cli.out.result(page, () => {
    cli.out.table(view.head, items.map((item) => view.row(item)));
    moreNote(cli, next_cursor, view.more);
  });
}
