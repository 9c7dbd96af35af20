/**
 * Repository: receipts of mutating operations (docs/api.md "Receipts"). A receipt is written in the same
 * TransactWriteItems as the change it records: callers add `receiptPut(...)` to their transaction.
 * A receipt names its target (bucket/key, or a secret's name) and never carries a value.
 */
import { TransactWriteCommand, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { newId } from '../ids.ts';
import { isConditionFailure, type Db } from './client.ts';
import type { Page } from './pagination.ts';
import { listProjectItems } from './pagination.ts';
import { keys, prefixes } from './table.ts';

/** Operations that are receipted. */
export type ReceiptOp = 'object.put' | 'object.delete' | 'bucket.delete' | 'secret.put' | 'secret.delete' | 'snapshot.delete' | 'replaced.delete' | 'project.delete' | 'project.relocate' | 'project.recover' | 'function.deploy' | 'function.delete';

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

/**
 * Writes `receipt` on its own, for a change that is not a DynamoDB item (a directory freed on a host
 * agent, docs/lifecycle.md "Freeing space"): idempotent by the receipt's id and time, so a repair that
 * writes it again after a crash answers false instead of writing a second one.
 */
export async function putReceipt(db: Db, receipt: Receipt): Promise<boolean> {
  try {
    await db.doc.send(new TransactWriteCommand({ TransactItems: [receiptPut(db, receipt)] }));
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** Lists a project's receipts, newest first. */
export async function listReceipts(db: Db, projectId: string, limit: number, cursor?: string): Promise<Page<Receipt>> {
  const page = await listProjectItems(db, projectId, prefixes.receipt, { limit, cursor }, { newestFirst: true });
  const items = page.items.map(
    (i): Receipt => ({ id: i.id, project: i.project, op: i.op, target: i.target, actor: i.actor, request_id: i.request_id, at: i.at }),
  );
  return { items, nextCursor: page.nextCursor };
}
