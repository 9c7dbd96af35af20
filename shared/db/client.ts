/**
 * The DynamoDB adapter: a document client and the table name, handed to every repository function.
 * The repository modules in this folder are the only code that builds DynamoDB requests (docs/architecture.md "Metadata in DynamoDB").
 */
import { DynamoDBClient, CreateTableCommand, DescribeTableCommand, ResourceNotFoundException } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Settings } from '../config.ts';
import { tableDefinition } from './table.ts';

/** What every repository function needs. */
export interface Db {
  doc: DynamoDBDocumentClient;
  table: string;
}

/** Builds the DynamoDB client from settings (an endpoint for DynamoDB Local, static credentials when given). */
export function createDb(settings: Pick<Settings, 'SVCD_DYNAMODB_ENDPOINT' | 'SVCD_DYNAMODB_REGION' | 'SVCD_TABLE' | 'SVCD_AWS_ACCESS_KEY_ID' | 'SVCD_AWS_SECRET_ACCESS_KEY'>): Db {
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
  return { doc, table: settings.SVCD_TABLE };
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
