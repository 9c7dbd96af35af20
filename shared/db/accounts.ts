/** Repository: accounts, their ended sessions and their project count, and invite codes (docs/api.md "Sessions"). */
import { GetCommand, PutCommand, QueryCommand, UpdateCommand, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { errors } from '../errors.ts';
import type { Db, ItemsRead, TableKey } from './client.ts';
import { isConditionFailure } from './client.ts';
import { GSI1, TTL_ATTRIBUTE, keys, prefixes } from './table.ts';

/** An account as stored: the secret itself is never stored, only its verifier. */
export interface AccountRecord {
  account_id: string;
  name: string | null;
  secret_verifier: string;
  created_at: string;
  /** Moves on at each rotation of the secret; a session issued at another generation has ended. */
  session_generation: number;
  /** When the secret was last rotated (null: never). */
  secret_rotated_at: string | null;
  /** Projects the account owns, kept in the transactions that create and remove them; null for an account created before the count was kept. */
  project_count: number | null;
}

/** What signup stores; the rest starts at its initial value. */
export type NewAccount = Pick<AccountRecord, 'account_id' | 'name' | 'secret_verifier' | 'created_at'>;

/** Creates an account (generation 0, no project yet); refuses to overwrite one. */
export async function createAccount(db: Db, account: NewAccount): Promise<void> {
  try {
    await db.doc.send(
      new PutCommand({
        TableName: db.table,
        Item: {
          ...keys.account(account.account_id),
          type: 'account',
          ...account,
          session_generation: 0,
          // `projects_counted` tells a kept count of 0 from an account older than the count.
          project_count: 0,
          projects_counted: true,
        },
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
  } catch (err) {
    if (isConditionFailure(err)) throw errors.conflict('account already exists');
    throw err;
  }
}

/** An account item as its record; null for anything that is not a whole account. */
function toAccount(item: Record<string, any> | undefined): AccountRecord | null {
  // An item holding only a count (a project created for an account that does not exist, as unit
  // tests do) is not an account: no one can sign in to it.
  if (!item || typeof item.secret_verifier !== 'string') return null;
  return {
    account_id: item.account_id,
    name: item.name ?? null,
    secret_verifier: item.secret_verifier,
    created_at: item.created_at,
    session_generation: item.session_generation ?? 0,
    secret_rotated_at: item.secret_rotated_at ?? null,
    project_count: item.projects_counted === true ? (item.project_count ?? 0) : null,
  };
}

/** Reads an account, or null. */
export async function getAccount(db: Db, accountId: string): Promise<AccountRecord | null> {
  const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: keys.account(accountId), ConsistentRead: true }));
  return toAccount(out.Item);
}

/**
 * The items that say whether a session still stands: the account (its generation) and the mark of
 * the session's end. Read them with the route's own first items in one batched read
 * (shared/db/client.ts `batchGetItems`), then judge with `sessionStandingIn`.
 */
export function sessionKeys(accountId: string, sessionId: string): TableKey[] {
  return [keys.account(accountId), keys.sessionEnd(accountId, sessionId)];
}

/** From items read with `sessionKeys`: the account (null when absent) and whether the session was ended. */
export function sessionStandingIn(items: ItemsRead, accountId: string, sessionId: string): { account: AccountRecord | null; ended: boolean } {
  return { account: toAccount(items.get(keys.account(accountId))), ended: items.get(keys.sessionEnd(accountId, sessionId)) !== undefined };
}

/**
 * Marks a session ended. Idempotent; the mark carries the table's TTL at the token's own expiry,
 * after which the token is refused by its signature check alone and the mark is of no use.
 */
export async function endSession(db: Db, input: { accountId: string; sessionId: string; endedAt: string; expiresAt: number }): Promise<void> {
  await db.doc.send(
    new PutCommand({
      TableName: db.table,
      Item: { ...keys.sessionEnd(input.accountId, input.sessionId), type: 'session-end', ended_at: input.endedAt, [TTL_ATTRIBUTE]: input.expiresAt },
    }),
  );
}

/**
 * Replaces the account's secret verifier and moves its session generation on, in one conditional
 * write, guarded by the generation the caller's session was issued at. Answers the new generation,
 * or null when the generation had already moved (another rotation ended the caller's session).
 */
export async function rotateAccountSecret(
  db: Db,
  input: { accountId: string; verifier: string; expectedGeneration: number; at: string },
): Promise<number | null> {
  const next = input.expectedGeneration + 1;
  // An account stored before generations were kept is at generation 0.
  const unset = input.expectedGeneration === 0 ? ' OR attribute_not_exists(session_generation)' : '';
  try {
    await db.doc.send(
      new UpdateCommand({
        TableName: db.table,
        Key: keys.account(input.accountId),
        UpdateExpression: 'SET secret_verifier = :verifier, session_generation = :next, secret_rotated_at = :at',
        ConditionExpression: `attribute_exists(secret_verifier) AND (session_generation = :expected${unset})`,
        ExpressionAttributeValues: { ':verifier': input.verifier, ':next': next, ':expected': input.expectedGeneration, ':at': input.at },
      }),
    );
    return next;
  } catch (err) {
    if (isConditionFailure(err)) return null;
    throw err;
  }
}

type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/**
 * The change of an account's project count by `delta` (+1 on create, -1 on removal), as an item of
 * the transaction that creates or removes the project, so the count never disagrees with the
 * projects. Unconditional: the project's own items carry the transaction's conditions.
 */
export function projectCountChange(db: Db, accountId: string, delta: 1 | -1): TransactItem {
  return {
    Update: {
      TableName: db.table,
      Key: keys.account(accountId),
      UpdateExpression: 'ADD project_count :delta',
      ExpressionAttributeValues: { ':delta': delta },
    },
  };
}

/**
 * Counts an account's projects through the index (for an account created before the count was
 * kept): the index is eventually consistent, which for projects that old is no concern.
 */
export async function countProjects(db: Db, accountId: string): Promise<number> {
  let count = 0;
  let start: Record<string, unknown> | undefined;
  do {
    const out = await db.doc.send(
      new QueryCommand({
        TableName: db.table,
        IndexName: GSI1.name,
        KeyConditionExpression: '#p = :p AND begins_with(#s, :prefix)',
        ExpressionAttributeNames: { '#p': GSI1.pk, '#s': GSI1.sk },
        ExpressionAttributeValues: { ':p': keys.projectsOf(accountId), ':prefix': prefixes.project },
        Select: 'COUNT',
        ExclusiveStartKey: start,
      }),
    );
    count += out.Count ?? 0;
    start = out.LastEvaluatedKey;
  } while (start);
  return count;
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
