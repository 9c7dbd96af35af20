/**
 * Lists as async iterators over pages (docs/sdk.md "Lists"): every list route answers one page and
 * `next_cursor` (docs/api.md "Decisions"); a `Pages` fetches the next page only when it is iterated.
 */
import type { AnswersOf, RouteDecl } from '../shared/api/index.ts';
import type { CallOptions, Transport } from './http.ts';
import type { RouteInput, Site } from './site.ts';
import type { PageInput } from './types.ts';

/** An answered page: its items under a name of its own, and the cursor of the next page. */
export interface AnyPage {
  next_cursor: string | null;
}

/** The pages of a list, fetched as they are iterated. */
export interface Pages<P extends AnyPage, T> extends AsyncIterable<P> {
  /** Every item of every page, fetched page by page. */
  items(): AsyncIterable<T>;
  /** Every item, in one array (reads the whole list). */
  all(): Promise<T[]>;
  /** The first page only. */
  first(): Promise<P>;
  /** The items of one of these pages. */
  itemsOf(page: P): T[];
}

/** The pages that `fetchPage` answers from `cursor` on; `itemsOf` takes a page's items. */
export function pages<P extends AnyPage, T>(
  fetchPage: (cursor: string | undefined) => Promise<P>,
  itemsOf: (page: P) => T[],
  cursor?: string,
): Pages<P, T> {
  async function* iterate(): AsyncGenerator<P> {
    let next = cursor;
    for (;;) {
      const page = await fetchPage(next);
      yield page;
      if (page.next_cursor === null || page.next_cursor === undefined) return;
      next = page.next_cursor;
    }
  }
  return {
    [Symbol.asyncIterator]: iterate,
    async *items() {
      for await (const page of iterate()) yield* itemsOf(page);
    },
    async all() {
      const out: T[] = [];
      for await (const page of iterate()) out.push(...itemsOf(page));
      return out;
    },
    first: () => fetchPage(cursor),
    itemsOf,
  };
}

/**
 * The pages of list route `site` (a GET with the session): `limit` and `cursor` from `input`, its
 * path parameters and any other query parameters from `request`.
 */
export function listPages<D extends RouteDecl, T>(
  transport: Transport,
  site: Site<D>,
  input: PageInput,
  call: CallOptions | undefined,
  itemsOf: (page: AnswersOf<D>) => T[],
  request: Pick<RouteInput<D>, 'params' | 'query'> = {},
): Pages<AnswersOf<D> & AnyPage, T> {
  type Page = AnswersOf<D> & AnyPage;
  const fetchPage = (cursor: string | undefined) =>
    transport.call(site, { ...request, query: { ...request.query, limit: input.limit, cursor } as unknown as RouteInput<D>['query'] }, call) as Promise<Page>;
  return pages<Page, T>(fetchPage, itemsOf, input.cursor);
}
