/**
 * Repository: project keys (contract "Project key", "Key states"; docs/dataplane.md "Keys").
 *
 * A key is two items written in one transaction (shapes in table.ts):
 * - `PRJ#<prj>` / `KEY#<key_id>`: the listing item in the project's partition (label, dates);
 * - `KEY#<key_id>` / `KEY`: the lookup item the `/v2` cold path reads by key id alone (project,
 *   verifier, revoked_at). Only the verifier HMAC-SHA256(pepper, secret) is stored, never the secret.
 * Revocation sets `revoked_at` on both, conditionally, so the first `revoked_at` is the one kept.
 */
import { GetCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { errors } from '../errors.ts';
import type { Db } from './client.ts';
import { cancellationReasons, isConditionFailure } from './client.ts';
import type { Page } from './pagination.ts';
import { listProjectItems } from './pagination.ts';
import { keys, prefixes } from './table.ts';

/** A key as listed and revoked (contract "GET keys"): never the secret, never the verifier. */
export interface KeyView {
  key_id: string;
  label: string | null;
  created_at: string;
  revoked_at: string | null;
}

/** What is stored when a key is issued. */
export interface NewKey {
  key_id: string;
  project: string;
  label: string | null;
  created_at: string;
  /** HMAC-SHA256(pepper, secret), hex (shared/auth.ts verifierOf). */
  verifier: string;
}

/** The lookup item the data plane verifies a presented key against. */
export interface KeyLookup {
  key_id: string;
  project: string;
  verifier: string;
  revoked_at: string | null;
}

function toView(item: Record<string, any>): KeyView {
  return { key_id: item.key_id, label: item.label ?? null, created_at: item.created_at, revoked_at: item.revoked_at ?? null };
}

/** Stores a new key: the listing item and the lookup item together, neither overwriting anything. */
export async function createKey(db: Db, key: NewKey): Promise<void> {
  try {
    await db.doc.send(
      new TransactWriteCommand({
        TransactItems: [
          {
            Put: {
              TableName: db.table,
              Item: { ...keys.projectKey(key.project, key.key_id), type: 'key', key_id: key.key_id, project: key.project, label: key.label, created_at: key.created_at },
              ConditionExpression: 'attribute_not_exists(pk)',
            },
          },
          {
            Put: {
              TableName: db.table,
              Item: { ...keys.keyLookup(key.key_id), type: 'key-by-id', key_id: key.key_id, project: key.project, verifier: key.verifier, created_at: key.created_at },
              ConditionExpression: 'attribute_not_exists(pk)',
            },
          },
        ],
      }),
    );
  } catch (err) {
    if (isConditionFailure(err) && cancellationReasons(err).includes('ConditionalCheckFailed')) {
      throw errors.conflict('key id collision, retry');
    }
    throw err;
  }
}

/** Lists a project's keys in key-id order (the sort key), revoked ones included. */
export async function listKeys(db: Db, projectId: string, limit: number, cursor?: string): Promise<Page<KeyView>> {
  const page = await listProjectItems(db, projectId, prefixes.key, { limit, cursor });
  return { items: page.items.map(toView), nextCursor: page.nextCursor };
}

/** Reads one key of a project, or null. */
export async function getKey(db: Db, projectId: string, keyId: string): Promise<KeyView | null> {
  const out = await db.doc.send(
    new GetCommand({ TableName: db.table, Key: keys.projectKey(projectId, keyId), ConsistentRead: true }),
  );
  return out.Item ? toView(out.Item) : null;
}

/**
 * Reads the lookup item of a key id, or null. Strongly consistent: a cold read right after a
 * revocation must see it (the revocation invariant holds for an agent whose cache is empty too).
 */
export async function lookupKey(db: Db, keyId: string): Promise<KeyLookup | null> {
  const out = await db.doc.send(new GetCommand({ TableName: db.table, Key: keys.keyLookup(keyId), ConsistentRead: true }));
  const i = out.Item;
  if (!i || typeof i.project !== 'string' || typeof i.verifier !== 'string') return null;
  return { key_id: i.key_id, project: i.project, verifier: i.verifier, revoked_at: i.revoked_at ?? null };
}

/**
 * Revokes a key of a project and answers its record. The write is conditional on the key not
 * being revoked yet, on both items at once, so the first `revoked_at` is kept: revoking again (or
 * concurrently) answers the original one. A key that is not this project's is 404.
 */
export async function revokeKey(db: Db, projectId: string, keyId: string, at: string): Promise<KeyView> {
  for (let attempt = 0; ; attempt++) {
    try {
      await db.doc.send(
        new TransactWriteCommand({
          TransactItems: [
            {
              Update: {
                TableName: db.table,
                Key: keys.projectKey(projectId, keyId),
                UpdateExpression: 'SET revoked_at = :at',
                ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(revoked_at)',
                ExpressionAttributeValues: { ':at': at },
              },
            },
            {
              Update: {
                TableName: db.table,
                Key: keys.keyLookup(keyId),
                UpdateExpression: 'SET revoked_at = :at',
                ConditionExpression: 'attribute_exists(pk) AND #project = :prj AND attribute_not_exists(revoked_at)',
                ExpressionAttributeNames: { '#project': 'project' },
                ExpressionAttributeValues: { ':at': at, ':prj': projectId },
              },
            },
          ],
        }),
      );
      const key = await getKey(db, projectId, keyId);
      if (!key) throw new Error(`key ${keyId} vanished after its revocation`);
      return key;
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      const key = await getKey(db, projectId, keyId);
      if (!key) throw errors.notFound(`key ${keyId} not found`);
      if (key.revoked_at !== null) return key;
      // Neither absent nor revoked: a concurrent transaction on the same items (TransactionConflict).
      if (attempt >= 4) throw err;
      await new Promise((r) => setTimeout(r, 20 * (attempt + 1)));
    }
  }
}
