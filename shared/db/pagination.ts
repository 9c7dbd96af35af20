/**
 * Pages of the lists (docs/api.md "Decisions": `limit`, `cursor`, `next_cursor`). A page reads one
 * item past `limit`, so `next_cursor` is null exactly when nothing follows: DynamoDB sets
 * LastEvaluatedKey whenever it stopped at `Limit`, even on the last item, and a cursor made from it
 * would lead to an empty page.
 *
 * The repository's cursor is the JSON of the key of the last item answered, checked against the
 * partition being listed. It never leaves the service as is: the handlers seal it for the one list
 * it belongs to (shared/cursors.ts).
 */
import { QueryCommand, type QueryCommandInput, type QueryCommandOutput } from '@aws-sdk/lib-dynamodb';
import { invalidCursor } from '../cursors.ts';
import type { Db } from './client.ts';
import { keys } from './table.ts';

type KeyMap = Record<string, unknown>;
/** An item as the document client answers it. */
type Item = NonNullable<QueryCommandOutput['Items']>[number];

/** A page of a list. */
export interface Page<T> {
  items: T[];
  /** Where the next page starts (the repository's cursor), or null when this page ends the list. */
  nextCursor: string | null;
}

/** Encodes a key as the repository's cursor, or null at the end of the list. */
export function encodeCursor(key: KeyMap | undefined): string | null {
  return key ? JSON.stringify(key) : null;
}

/**
 * Decodes a repository cursor; `partition` names the attribute and value the key must carry. One
 * that does not decode, holds anything but strings, or names another partition is 400.
 */
export function decodeCursor(cursor: string | undefined, partition: [string, string]): KeyMap | undefined {
  if (cursor === undefined) return undefined;
  let key: unknown;
  try {
    key = JSON.parse(cursor);
  } catch {
    throw invalidCursor();
  }
  if (
    typeof key !== 'object' || key === null || Array.isArray(key) ||
    (key as KeyMap)[partition[0]] !== partition[1] ||
    !Object.values(key as KeyMap).every((v) => typeof v === 'string')
  ) {
    throw invalidCursor();
  }
  return key as KeyMap;
}

/** Most items one Query may ask for: one past the largest page. */
const MAX_LIMIT = 1000;

/**
 * Runs `query` (without `Limit` or `ExclusiveStartKey`) from `cursor` for one page of `limit`
 * items: it reads up to `limit + 1` items, following DynamoDB's own pages (1 MB each) as needed,
 * and answers a cursor only when an item beyond the page exists. `keyOf` gives an item's key (the
 * table's, plus the index's when `query` reads an index) as DynamoDB would name it in
 * LastEvaluatedKey; `partition` is checked in a cursor as in decodeCursor.
 */
export async function queryPage(
  db: Db,
  query: Omit<QueryCommandInput, 'Limit' | 'ExclusiveStartKey'>,
  { limit, cursor, partition, keyOf }: { limit: number; cursor: string | undefined; partition: [string, string]; keyOf: (item: Item) => KeyMap },
): Promise<{ items: Item[]; nextCursor: string | null }> {
  const want = Math.min(limit, MAX_LIMIT) + 1;
  const items: Item[] = [];
  let start = decodeCursor(cursor, partition);
  do {
    const out = await db.doc.send(new QueryCommand({ ...query, Limit: want - items.length, ExclusiveStartKey: start }));
    items.push(...(out.Items ?? []));
    start = out.LastEvaluatedKey;
  } while (start && items.length < want);
  if (items.length < want) return { items, nextCursor: null };
  const page = items.slice(0, want - 1);
  return { items: page, nextCursor: encodeCursor(keyOf(page[page.length - 1]!)) };
}

/** What a listing of a project's items may add to its query. */
export interface ProjectListOptions {
  /** Sort keys descending (time-ordered ids: newest first). */
  newestFirst?: boolean;
  consistent?: boolean;
  /** Only these attributes; then `keyOf` rebuilds the key the projection leaves out. */
  projection?: { expression: string; names: Record<string, string> };
  keyOf?: (item: Item) => KeyMap;
}

/**
 * One page of the items of a project whose sort key starts with `prefix` (shared/db/table.ts
 * `prefixes`), in sort-key order: the query of every per-project list (`queryPage`).
 */
export function listProjectItems(
  db: Db,
  projectId: string,
  prefix: string,
  page: { limit: number; cursor: string | undefined },
  options: ProjectListOptions = {},
): Promise<{ items: Item[]; nextCursor: string | null }> {
  const pk = keys.project(projectId).pk;
  const query: Omit<QueryCommandInput, 'Limit' | 'ExclusiveStartKey'> = {
    TableName: db.table,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
    ExpressionAttributeValues: { ':pk': pk, ':prefix': prefix },
    ...(options.newestFirst ? { ScanIndexForward: false } : {}),
    ...(options.consistent ? { ConsistentRead: true } : {}),
    ...(options.projection ? { ProjectionExpression: options.projection.expression, ExpressionAttributeNames: options.projection.names } : {}),
  };
  return queryPage(db, query, { ...page, partition: ['pk', pk], keyOf: options.keyOf ?? tableKeyOf });
}

/** The key of an item of the table: its `pk` and `sk`. */
export function tableKeyOf(item: Item): KeyMap {
  return { pk: item.pk, sk: item.sk };
}

/**
 * Runs `query` to the end of its result, handing each of DynamoDB's pages to `visit` in order;
 * `visit` answers true to stop there. For reads that need every item of a key range (a sweep, a
 * purge), not for the lists a client pages through (queryPage).
 */
export async function queryEach(
  db: Db,
  query: Omit<QueryCommandInput, 'ExclusiveStartKey'>,
  visit: (items: Item[]) => boolean | void | Promise<boolean | void>,
): Promise<void> {
  let start: KeyMap | undefined;
  do {
    const out = await db.doc.send(new QueryCommand({ ...query, ExclusiveStartKey: start }));
    if ((await visit(out.Items ?? [])) === true) return;
    start = out.LastEvaluatedKey;
  } while (start);
}
