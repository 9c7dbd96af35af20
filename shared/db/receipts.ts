/**
 * Repository: receipts of mutating operations (docs/api.md "Receipts"). A receipt is written in the same
 * TransactWriteItems as the change it records: callers add `receiptPut(...)` to their transaction.
 * A receipt names its target (bucket/key, or a secret's name) and never carries a value.
 */
import type { TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { newId } from '../ids.ts';
import type { Db } from './client.ts';
import type { Page } from './pagination.ts';
import { queryPage, tableKeyOf } from './pagination.ts';
import { keys } from './table.ts';

/** Operations that are receipted. */
export type ReceiptOp = 'object.put' | 'object.delete' | 'secret.put' | 'secret.delete';

/** A receipt as answered by `GET /v0/projects/{id}/receipts`. */
export interface Receipt {
  id: string;
  project: string;
  op: ReceiptOp;
  target: string;
  actor: string;
  request_id: string;
  at: string;
}

type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** A new receipt record (id assigned here). */
export function newReceipt(fields: Omit<Receipt, 'id'>): Receipt {
  return { id: newId('rcpt'), ...fields };
}

/** The transaction item that writes `receipt`; newest-first order comes from the sort key. */
export function receiptPut(db: Db, receipt: Receipt): TransactItem {
  return {
    Put: {
      TableName: db.table,
      Item: { ...keys.receipt(receipt.project, receipt.at, receipt.id), type: 'receipt', ...receipt },
      ConditionExpression: 'attribute_not_exists(pk)',
    },
  };
}

/** Lists a project's receipts, newest first. */
export async function listReceipts(db: Db, projectId: string, limit: number, cursor?: string): Promise<Page<Receipt>> {
  const pk = keys.project(projectId).pk;
  const page = await queryPage(
    db,
    {
      TableName: db.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
      ExpressionAttributeValues: { ':pk': pk, ':prefix': 'RCPT#' },
      ScanIndexForward: false,
    },
    { limit, cursor, partition: ['pk', pk], keyOf: tableKeyOf },
  );
  const items = page.items.map(
    (i): Receipt => ({ id: i.id, project: i.project, op: i.op, target: i.target, actor: i.actor, request_id: i.request_id, at: i.at }),
  );
  return { items, nextCursor: page.nextCursor };
}
