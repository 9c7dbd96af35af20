/**
 * Repository: function secrets (contract "Function secret (metadata)", "PUT functions/secrets/{name}";
 * docs/secrets.md). One item per secret in the project partition, `SECRET#<name>`, holding
 * the metadata, the sealed value (ciphertext, nonce, key id) and nothing in clear. Every put and
 * delete writes its receipt in the same transaction (docs/api.md "Receipts"); receipts name the secret,
 * never its value.
 *
 * Versions never lose an increment: each write is conditioned on the version (and creation time) it
 * read, and is retried from a fresh read when another write got there first.
 */
import { GetCommand, QueryCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { errors } from '../errors.ts';
import type { SealedSecret } from '../secrets-crypto.ts';
import type { Db } from './client.ts';
import { isConditionFailure } from './client.ts';
import type { Page } from './pagination.ts';
import { listProjectItems } from './pagination.ts';
import { newReceipt, receiptPut } from './receipts.ts';
import { keys, prefixes } from './table.ts';

/** Secret names (contract "Limits"). */
export const SECRET_NAME_PATTERN = /^[A-Z][A-Z0-9_]{0,63}$/;
/** Names the service sets at every invocation; a secret can never shadow them (contract PUT secrets). */
export const RESERVED_ENV_NAMES = ['PROJECT_ID', 'FUNCTION_NAME', 'CLOUD_ORIGIN'] as const;

/** A secret as answered (contract "Function secret (metadata)"): never the value. */
export interface SecretMetadata {
  project: string;
  name: string;
  version: number;
  created_at: string;
  updated_at: string;
}

/** A secret with its sealed value, for the host agent that injects it. */
export interface SealedSecretRecord extends SecretMetadata {
  sealed: SealedSecret;
}

/** Who changed a secret and when: the receipt's actor, request id and time. */
export interface SecretChange {
  project: string;
  name: string;
  actor: string;
  requestId: string;
  at: string;
}

/** How often a write retries after losing a race to another write of the same secret. */
const MAX_ATTEMPTS = 20;
/** The metadata attributes, aliased (`name` and `project` are DynamoDB reserved words). */
const METADATA_PROJECTION = {
  expression: '#name, #project, #version, #created, #updated',
  names: { '#name': 'name', '#project': 'project', '#version': 'version', '#created': 'created_at', '#updated': 'updated_at' },
};
/** The condition a change of an existing secret carries: still the version and creation it read. */
const UNCHANGED = {
  expression: '#version = :v AND #created = :c',
  names: { '#version': 'version', '#created': 'created_at' },
};

function metadataOf(item: Record<string, any>): SecretMetadata {
  return { project: item.project, name: item.name, version: item.version, created_at: item.created_at, updated_at: item.updated_at };
}

/** Waits a little, more after each lost race, with jitter so racing writers spread out. */
function backoff(attempt: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.random() * 5 * (attempt + 1)));
}

/** Reads a secret's metadata, or null (strongly consistent: the writes below build on it). */
export async function getSecret(db: Db, projectId: string, name: string): Promise<SecretMetadata | null> {
  const out = await db.doc.send(
    new GetCommand({
      TableName: db.table,
      Key: keys.secret(projectId, name),
      ConsistentRead: true,
      ProjectionExpression: METADATA_PROJECTION.expression,
      ExpressionAttributeNames: METADATA_PROJECTION.names,
    }),
  );
  return out.Item ? metadataOf(out.Item) : null;
}

/**
 * Creates secret `change.name` (version 1) or rotates it (version + 1) with the sealed value, and
 * writes its `secret.put` receipt in the same transaction. `created` tells which happened.
 */
export async function putSecret(
  db: Db,
  change: SecretChange,
  sealed: SealedSecret,
): Promise<{ secret: SecretMetadata; created: boolean }> {
  const { project, name, at } = change;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const current = await getSecret(db, project, name);
    const secret: SecretMetadata = current
      ? { project, name, version: current.version + 1, created_at: current.created_at, updated_at: at }
      : { project, name, version: 1, created_at: at, updated_at: at };
    // Rotation is guarded by version and creation time, so a delete and re-create in between (which
    // restarts at version 1) is never mistaken for the secret that was read.
    const condition = current
      ? {
          ConditionExpression: UNCHANGED.expression,
          ExpressionAttributeNames: UNCHANGED.names,
          ExpressionAttributeValues: { ':v': current.version, ':c': current.created_at },
        }
      : { ConditionExpression: 'attribute_not_exists(pk)' };
    try {
      await db.doc.send(
        new TransactWriteCommand({
          TransactItems: [
            {
              Put: {
                TableName: db.table,
                Item: { ...keys.secret(project, name), type: 'secret', ...secret, ...sealed },
                ...condition,
              },
            },
            receiptPut(db, newReceipt({ project, op: 'secret.put', target: name, actor: change.actor, request_id: change.requestId, at })),
          ],
        }),
      );
      return { secret, created: !current };
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      await backoff(attempt);
    }
  }
  throw errors.conflict(`secret ${name} is being changed concurrently, retry`);
}

/**
 * Deletes secret `change.name` and writes its `secret.delete` receipt in the same transaction;
 * answers the metadata of what was deleted. Absent: 404.
 */
export async function deleteSecret(db: Db, change: SecretChange): Promise<SecretMetadata> {
  const { project, name, at } = change;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const current = await getSecret(db, project, name);
    if (!current) throw errors.notFound(`secret ${name} not found`);
    try {
      await db.doc.send(
        new TransactWriteCommand({
          TransactItems: [
            {
              Delete: {
                TableName: db.table,
                Key: keys.secret(project, name),
                ConditionExpression: UNCHANGED.expression,
                ExpressionAttributeNames: UNCHANGED.names,
                ExpressionAttributeValues: { ':v': current.version, ':c': current.created_at },
              },
            },
            receiptPut(db, newReceipt({ project, op: 'secret.delete', target: name, actor: change.actor, request_id: change.requestId, at })),
          ],
        }),
      );
      return current;
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      await backoff(attempt);
    }
  }
  throw errors.conflict(`secret ${name} is being changed concurrently, retry`);
}

/** Lists a project's secrets by name: metadata only (the sealed value is not even read). */
export async function listSecrets(db: Db, projectId: string, limit: number, cursor?: string): Promise<Page<SecretMetadata>> {
  const page = await listProjectItems(
    db,
    projectId,
    prefixes.secret,
    { limit, cursor },
    // The projection leaves the key out: it is rebuilt from the name.
    { projection: METADATA_PROJECTION, keyOf: (i) => keys.secret(projectId, String(i.name)) },
  );
  return { items: page.items.map(metadataOf), nextCursor: page.nextCursor };
}

/**
 * Every secret of a project with its sealed value, by name, read strongly consistently so the next
 * invocation after a put or delete sees the new set (contract PUT secrets).
 */
export async function loadSealedSecrets(db: Db, projectId: string): Promise<SealedSecretRecord[]> {
  const pk = keys.project(projectId).pk;
  const out: SealedSecretRecord[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await db.doc.send(
      new QueryCommand({
        TableName: db.table,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': pk, ':prefix': prefixes.secret },
        ConsistentRead: true,
        ExclusiveStartKey: start,
      }),
    );
    for (const item of page.Items ?? []) {
      out.push({ ...metadataOf(item), sealed: { ciphertext: item.ciphertext, nonce: item.nonce, key_id: item.key_id } });
    }
    start = page.LastEvaluatedKey;
  } while (start);
  return out;
}
