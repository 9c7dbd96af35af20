/**
 * One page of a list as answered (docs/api.md "Decisions"): `read` gets the page size (the query's
 * `limit`, else the default) and where to resume, opened from the query's sealed `cursor`; the
 * answer's `next_cursor` is sealed for the same list. `list` names the list (its kind and the ids it
 * is scoped to), so a cursor of another list, project, bucket or account does not open here.
 */
import type { Page } from '../../shared/db/pagination.ts';
import type { Deps } from '../context.ts';

/** A list query as parsed: `limit` and `cursor`, both optional. */
export interface PageQuery {
  limit?: number | undefined;
  cursor?: string | undefined;
}

/** One answered page: its items and the sealed cursor of the next one (null: the last page). */
export interface AnsweredPage<T> {
  items: T[];
  next_cursor: string | null;
}

/** Reads one page of the list `list` through `read`, opening and sealing its cursors. */
export async function pageOf<T>(
  deps: Deps,
  list: readonly string[],
  query: PageQuery,
  read: (limit: number, after: string | undefined) => Promise<Page<T>>,
): Promise<AnsweredPage<T>> {
  const { cursors, settings } = deps;
  const after = query.cursor === undefined ? undefined : await cursors.open(list, query.cursor);
  const page = await read(query.limit ?? settings.SVCD_LIST_LIMIT_DEFAULT, after);
  return { items: page.items, next_cursor: page.nextCursor === null ? null : await cursors.seal(list, page.nextCursor) };
}
