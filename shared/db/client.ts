/**
 * The DynamoDB adapter: a document client and the table name, handed to every repository function.
 * The repository modules in this folder are the only code that builds DynamoDB requests (docs/architecture.md "Metadata in DynamoDB").
 */
import { DynamoDBClient, CreateTableCommand, DescribeTableCommand, ResourceNotFoundException } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Settings } from '../config.ts';
import { tableDefinition } from './table.ts';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { createWire, type DbTransport, type WireCall } from './wire.ts';

/** What every repository function needs. */
export interface Db {
  doc: DynamoDBDocumentClient;
  table: string;
  /** The same table over DynamoDB's JSON protocol directly, for the calls on every request's path (./wire.ts). */
  wire: WireCall;
}

/** Options of `createDb`. */
export interface DbOptions {
  /** How the wire sends its requests (default fetch; a Node entry passes ./transport-node.ts). */
  transport?: DbTransport;
}

/** Builds the DynamoDB client from settings (an endpoint for DynamoDB Local, static credentials when given). */
export function createDb(
  settings: Pick<Settings, 'SVCD_DYNAMODB_ENDPOINT' | 'SVCD_DYNAMODB_REGION' | 'SVCD_TABLE' | 'SVCD_AWS_ACCESS_KEY_ID' | 'SVCD_AWS_SECRET_ACCESS_KEY'>,
  options: DbOptions = {},
): Db {
  const credentials =
    settings.SVCD_AWS_ACCESS_KEY_ID && settings.SVCD_AWS_SECRET_ACCESS_KEY
      ? { accessKeyId: settings.SVCD_AWS_ACCESS_KEY_ID, secretAccessKey: settings.SVCD_AWS_SECRET_ACCESS_KEY }
      : undefined;
  const client = new DynamoDBClient({
    region: settings.SVCD_DYNAMODB_REGION,
    ...(settings.SVCD_DYNAMODB_ENDPOINT ? { endpoint: settings.SVCD_DYNAMODB_ENDPOINT } : {}),
    ...(credentials ? { credentials } : {}),
    maxAttempts: 3,
  });
  const doc = DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: false },
  });
  const wire = createWire(client, {
    region: settings.SVCD_DYNAMODB_REGION,
    endpoint: settings.SVCD_DYNAMODB_ENDPOINT,
    ...(options.transport ? { transport: options.transport } : {}),
  });
  return { doc, table: settings.SVCD_TABLE, wire };
}

/** Creates the table and its index when absent and waits until it is active. */
export async function ensureTable(db: Db): Promise<void> {
  try {
    await db.doc.send(new DescribeTableCommand({ TableName: db.table }));
    return;
  } catch (err) {
    if (!(err instanceof ResourceNotFoundException)) throw err;
  }
  try {
    await db.doc.send(new CreateTableCommand(tableDefinition(db.table)));
  } catch (err) {
    if ((err as Error).name !== 'ResourceInUseException') throw err;
  }
  for (let i = 0; i < 100; i++) {
    const d = await db.doc.send(new DescribeTableCommand({ TableName: db.table }));
    if (d.Table?.TableStatus === 'ACTIVE') return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`table ${db.table} did not become active`);
}

/** True for the SDK's "a condition did not hold" failures, single or transactional. */
export function isConditionFailure(err: unknown): boolean {
  const name = (err as { name?: string } | null)?.name;
  return name === 'ConditionalCheckFailedException' || name === 'TransactionCanceledException';
}

/** For a cancelled transaction: the cancellation reason code of each item, in order. */
export function cancellationReasons(err: unknown): string[] {
  const reasons = (err as { CancellationReasons?: { Code?: string }[] } | null)?.CancellationReasons ?? [];
  return reasons.map((r) => r.Code ?? 'None');
}

/** The primary key of one item of the table (shared/db/table.ts `keys`). */
export interface TableKey {
  pk: string;
  sk: string;
}

/** Items read together, looked up by their key; an absent item is undefined. */
export interface ItemsRead {
  get(key: TableKey): Record<string, any> | undefined;
}

const itemId = (k: { pk: unknown; sk: unknown }) => `${String(k.pk)}\u0000${String(k.sk)}`;

/**
 * Reads up to 100 items in one strongly consistent round trip (BatchGetItem), so checks that need
 * several items (a session and the project it acts on) cost one read. Repeated keys are asked once;
 * keys DynamoDB leaves unprocessed (throttling) are asked again after a short growing pause. Sent
 * over the wire (./wire.ts), items converted by @aws-sdk/util-dynamodb: every authenticated request
 * makes this read.
 */
export async function batchGetItems(db: Db, wanted: readonly TableKey[]): Promise<ItemsRead> {
  const found = new Map<string, Record<string, any>>();
  let pending: Record<string, unknown>[] = [...new Map(wanted.map((k) => [itemId(k), marshall({ pk: k.pk, sk: k.sk })])).values()];
  if (pending.length > 100) throw new Error('a batched read takes at most 100 keys');
  for (let attempt = 0; pending.length > 0; attempt++) {
    if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(200, 10 * 2 ** attempt)));
    if (attempt >= 8) throw new Error('DynamoDB left keys of a batched read unprocessed 8 times');
    const out = await db.wire('BatchGetItem', { RequestItems: { [db.table]: { Keys: pending, ConsistentRead: true } } });
    for (const raw of out.Responses?.[db.table] ?? []) {
      // As the document client converts them (numbers beyond the safe integers as BigInt).
      const item = unmarshall(raw);
      found.set(itemId(item as TableKey), item);
    }
    pending = out.UnprocessedKeys?.[db.table]?.Keys ?? [];
  }
  return { get: (key) => found.get(itemId(key)) };
}
