/** Repository: accounts and invite codes. */
import { GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { errors } from '../errors.ts';
import type { Db } from './client.ts';
import { isConditionFailure } from './client.ts';
import { GSI1, keys } from './table.ts';

/** An account as stored: the secret itself is never stored, only its verifier. */
export interface AccountRecord {
  account_id: string;
  name: string | null;
  secret_verifier: string;
  created_at: string;
}

/** Creates an account; refuses to overwrite one. */
export async function createAccount(db: Db, account: AccountRecord): Promise<void> {
  try {
    await db.doc.send(
      new PutCommand({
        TableName: db.table,
        Item: { ...keys.account(account.account_id), type: 'account', ...account },
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
  } catch (err) {
    if (isConditionFailure(err)) throw errors.conflict('account already exists');
    throw err;
  }
}

/** Reads an account, or null. */
export async function getAccount(db: Db, accountId: string): Promise<AccountRecord | null> {
  const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: keys.account(accountId) }));
  if (!out.Item) return null;
  const { account_id, name, secret_verifier, created_at } = out.Item;
  return { account_id, name: name ?? null, secret_verifier, created_at };
}

/** Stores an invite code (operators add them; signup then requires one). */
export async function putInvite(db: Db, code: string, createdAt: string): Promise<void> {
  await db.doc.send(
    new PutCommand({
      TableName: db.table,
      Item: { ...keys.invite(code), type: 'invite', code, created_at: createdAt, [GSI1.pk]: 'INVITES', [GSI1.sk]: code },
    }),
  );
}

/** True when the invite code is stored. */
export async function inviteExists(db: Db, code: string): Promise<boolean> {
  const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: keys.invite(code) }));
  return out.Item !== undefined;
}

/** True when any invite row exists (the deployment is then invite-gated). */
export async function anyInvites(db: Db): Promise<boolean> {
  const out = await db.doc.send(
    new QueryCommand({
      TableName: db.table,
      IndexName: GSI1.name,
      KeyConditionExpression: '#p = :p',
      ExpressionAttributeNames: { '#p': GSI1.pk },
      ExpressionAttributeValues: { ':p': 'INVITES' },
      Limit: 1,
    }),
  );
  return (out.Items?.length ?? 0) > 0;
}
