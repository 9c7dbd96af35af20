/**
 * Repository: deployed functions (docs/functions.md "Versions and metadata"). In the project's
 * partition, one head item per function (`FN#<name>`: its current version and that version's
 * settings) and one item per deployed version (`FNV#<name>#<gen>#<v>`, shared/db/table.ts), each
 * naming the blob that holds the module's bytes.
 *
 * A deploy is one transaction: the head moves to the next version (conditioned on the version and
 * generation it read, or on there being no head), the version item is created, the project must still
 * exist, and the `function.deploy` receipt is written. Deleting removes the head and writes the
 * `function.delete` receipt in one transaction (the function is gone from then on); its version items
 * are removed afterwards (`deleteVersions`), and a function deployed again under the same name starts
 * a new generation, so a version item left behind by a crash is never listed or overwritten.
 */
import { BatchWriteCommand, GetCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { errors } from '../errors.ts';
import type { BlobBackend } from '../blobs/store.ts';
import type { FunctionSettings, FunctionVersionView, FunctionView } from '../schemas/functions.ts';
import type { Db } from './client.ts';
import { cancellationReasons, isConditionFailure } from './client.ts';
import type { Page } from './pagination.ts';
import { listProjectItems, queryEach } from './pagination.ts';
import { newReceipt, receiptPut } from './receipts.ts';
import { keys, prefixes } from './table.ts';

/** Where a version's module bytes are: the blob store and the blob's name (shared/blobs/names.ts). */
export interface ModuleBlob {
  backend: BlobBackend;
  blob: string;
}

/** A version as stored. */
export interface FunctionVersionRecord extends FunctionVersionView, ModuleBlob {
  /** The generation of the function the version belongs to. */
  generation: string;
}

/** A function's head as stored: its current version, with the function's own times. */
export interface FunctionRecord extends FunctionView, ModuleBlob {
  generation: string;
}

/** A new version to record. */
export interface NewVersion extends FunctionSettings, ModuleBlob {
  project: string;
  name: string;
  sha256: string;
  size: number;
}

/** Who changes a function and when, for its receipt. */
export interface FunctionChange {
  actor: string;
  requestId: string;
  at: string;
}

/** How often a deploy retries after losing a race to another deploy of the same function. */
const MAX_ATTEMPTS = 20;

function versionOf(item: Record<string, any>): FunctionVersionRecord {
  return {
    project: item.project,
    name: item.name,
    version: item.version,
    sha256: item.sha256,
    size: item.size,
    timeout_ms: item.timeout_ms,
    memory_mb: item.memory_mb,
    max_concurrency: item.max_concurrency,
    created_at: item.created_at,
    generation: item.generation,
    backend: item.backend,
    blob: item.blob,
  };
}

function headOf(item: Record<string, any>): FunctionRecord {
  return { ...versionOf(item), updated_at: item.updated_at };
}

/** A function as answered (no storage details). */
export function functionView(f: FunctionRecord): FunctionView {
  const { generation: _g, backend: _b, blob: _n, ...view } = f;
  return view;
}

/** A version as answered (no storage details). */
export function versionView(v: FunctionVersionRecord): FunctionVersionView {
  const { generation: _g, backend: _b, blob: _n, ...view } = v;
  return view;
}

/** Reads a function's head, or null (strongly consistent: a deploy builds on it, an invocation runs it). */
export async function getFunction(db: Db, projectId: string, name: string): Promise<FunctionRecord | null> {
  const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: keys.fn(projectId, name), ConsistentRead: true }));
  return out.Item ? headOf(out.Item) : null;
}

/**
 * Records `next` as the function's new version: version 1 of a new generation when the function
 * does not exist (`created`), else the current version + 1. Answers the head as written. 404 when
 * the project no longer exists (deleted meanwhile).
 */
export async function putVersion(
  db: Db,
  next: NewVersion,
  change: FunctionChange,
  newGeneration: () => string,
): Promise<{ head: FunctionRecord; created: boolean }> {
  const { project, name } = next;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const current = await getFunction(db, project, name);
    const generation = current?.generation ?? newGeneration();
    const version = (current?.version ?? 0) + 1;
    const record: FunctionVersionRecord = {
      project,
      name,
      version,
      sha256: next.sha256,
      size: next.size,
      timeout_ms: next.timeout_ms,
      memory_mb: next.memory_mb,
      max_concurrency: next.max_concurrency,
      created_at: change.at,
      generation,
      backend: next.backend,
      blob: next.blob,
    };
    const head: FunctionRecord = { ...record, created_at: current?.created_at ?? change.at, updated_at: change.at };
    const condition = current
      ? {
          ConditionExpression: '#version = :v AND #generation = :g',
          ExpressionAttributeNames: { '#version': 'version', '#generation': 'generation' },
          ExpressionAttributeValues: { ':v': current.version, ':g': current.generation },
        }
      : { ConditionExpression: 'attribute_not_exists(pk)' };
    try {
      await db.doc.send(
        new TransactWriteCommand({
          TransactItems: [
            {
              ConditionCheck: {
                TableName: db.table,
                Key: keys.project(project),
                ConditionExpression: 'attribute_exists(pk)',
              },
            },
            { Put: { TableName: db.table, Item: { ...keys.fn(project, name), type: 'function', ...head }, ...condition } },
            {
              Put: {
                TableName: db.table,
                Item: { ...keys.fnVersion(project, name, generation, version), type: 'function_version', ...record },
                ConditionExpression: 'attribute_not_exists(pk)',
              },
            },
            receiptPut(db, newReceipt({ project, op: 'function.deploy', target: `${name}@${version}`, actor: change.actor, request_id: change.requestId, at: change.at })),
          ],
        }),
      );
      return { head, created: !current };
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      if (cancellationReasons(err)[0] === 'ConditionalCheckFailed') throw errors.notFound(`project ${project} not found`);
      await new Promise((r) => setTimeout(r, Math.random() * 5 * (attempt + 1)));
    }
  }
  throw errors.conflict(`function ${name} is being deployed concurrently, retry`);
}

/**
 * Removes the function's head with its `function.delete` receipt, if the head is still `expected`
 * (its version and generation); answers false when it changed meanwhile (the caller reads again).
 */
export async function deleteHead(db: Db, expected: FunctionRecord, change: FunctionChange): Promise<boolean> {
  const { project, name } = expected;
  try {
    await db.doc.send(
      new TransactWriteCommand({
        TransactItems: [
          {
            Delete: {
              TableName: db.table,
              Key: keys.fn(project, name),
              ConditionExpression: '#version = :v AND #generation = :g',
              ExpressionAttributeNames: { '#version': 'version', '#generation': 'generation' },
              ExpressionAttributeValues: { ':v': expected.version, ':g': expected.generation },
            },
          },
          receiptPut(db, newReceipt({ project, op: 'function.delete', target: name, actor: change.actor, request_id: change.requestId, at: change.at })),
        ],
      }),
    );
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** Every version item of the function's `generation`, oldest first. */
export async function allVersions(db: Db, projectId: string, name: string, generation: string): Promise<FunctionVersionRecord[]> {
  const out: FunctionVersionRecord[] = [];
  await queryEach(db, itemsUnder(db, projectId, `${prefixes.fnVersion}${name}#${generation}#`), (items) => void out.push(...items.map(versionOf)));
  return out;
}


/** Heads (`FN#<name>`) and versions (`FNV#…`) in one query: the prefix the two share. */
const FN_ITEMS = prefixes.fn.slice(0, -1);

/** A strongly consistent query of the project's items whose sort key starts with `prefix`. */
function itemsUnder(db: Db, projectId: string, prefix: string) {
  return {
    TableName: db.table,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
    ExpressionAttributeValues: { ':pk': keys.project(projectId).pk, ':prefix': prefix },
    ConsistentRead: true,
  };
}

/** Removes version items (after their function's head is gone); removing one already gone is not an error. */
export async function deleteVersions(db: Db, versions: readonly FunctionVersionRecord[]): Promise<void> {
  for (let i = 0; i < versions.length; i += 25) {
    let requests: Record<string, any>[] = versions
      .slice(i, i + 25)
      .map((v) => ({ DeleteRequest: { Key: keys.fnVersion(v.project, v.name, v.generation, v.version) } }));
    for (let attempt = 0; requests.length > 0; attempt++) {
      if (attempt === 10) throw new Error(`DynamoDB left ${requests.length} version items undeleted`);
      const out = await db.doc.send(new BatchWriteCommand({ RequestItems: { [db.table]: requests } }));
      requests = (out.UnprocessedItems?.[db.table] ?? []) as Record<string, any>[];
      if (requests.length > 0) await new Promise((r) => setTimeout(r, 20 * 2 ** attempt));
    }
  }
}

/** One page of a project's functions, by name. */
export async function listFunctions(db: Db, projectId: string, limit: number, cursor?: string): Promise<Page<FunctionRecord>> {
  const page = await listProjectItems(db, projectId, prefixes.fn, { limit, cursor });
  return { items: page.items.map(headOf), nextCursor: page.nextCursor };
}

/** One page of the versions of the function's current generation, newest first. */
export async function listVersions(
  db: Db,
  head: Pick<FunctionRecord, 'project' | 'name' | 'generation'>,
  limit: number,
  cursor?: string,
): Promise<Page<FunctionVersionRecord>> {
  const page = await listProjectItems(db, head.project, `${prefixes.fnVersion}${head.name}#${head.generation}#`, { limit, cursor }, { newestFirst: true });
  return { items: page.items.map(versionOf), nextCursor: page.nextCursor };
}

/**
 * The blob names and module digests every version item of the project refers to (any generation, so
 * a version left behind by a crash keeps its bytes until it is removed itself): what the `fs` blob
 * sweep and the agent's local copies must keep.
 */
export async function moduleReferences(db: Db, projectId: string): Promise<{ blobs: Set<string>; sha256s: Set<string> }> {
  const blobs = new Set<string>();
  const sha256s = new Set<string>();
  // `blob` is a DynamoDB reserved word.
  const query = { ...itemsUnder(db, projectId, prefixes.fnVersion), ProjectionExpression: '#blob, sha256', ExpressionAttributeNames: { '#blob': 'blob' } };
  await queryEach(db, query, (items) => {
    for (const item of items) {
      if (typeof item.blob === 'string') blobs.add(item.blob);
      if (typeof item.sha256 === 'string') sha256s.add(item.sha256);
    }
  });
  return { blobs, sha256s };
}

/**
 * Version items created before `before` whose function no longer has them as its generation (a
 * delete that crashed before removing them), for the agent's start-up sweep. Versions created from
 * `before` on are never judged: the function may have been deployed again while the sweep read.
 */
export async function orphanVersions(db: Db, projectId: string, before: string): Promise<FunctionVersionRecord[]> {
  const heads = new Map<string, string>();
  const versions: FunctionVersionRecord[] = [];
  await queryEach(db, itemsUnder(db, projectId, FN_ITEMS), (items) => {
    for (const item of items) {
      if (item.type === 'function') heads.set(item.name, item.generation);
      else if (item.type === 'function_version') versions.push(versionOf(item));
    }
  });
  return versions.filter((v) => v.created_at < before && heads.get(v.name) !== v.generation);
}
