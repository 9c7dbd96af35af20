/**
 * The one DynamoDB table of the service (docs/architecture.md "Metadata in DynamoDB"): single-table design with `pk`/`sk` and one GSI
 * `gsi1` over `gsi1pk`/`gsi1sk`. Defined here once; the local stack, the tests and the deployment
 * template all create it from this definition.
 */
import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';

export const TABLE_KEYS = { pk: 'pk', sk: 'sk' } as const;
export const GSI1 = { name: 'gsi1', pk: 'gsi1pk', sk: 'gsi1sk' } as const;
/**
 * The table's one time-to-live attribute (unix seconds): an item holding it may be dropped by
 * DynamoDB after that time, so only items that are useless by then carry it.
 */
export const TTL_ATTRIBUTE = 'ttl';

/** The CreateTable request for a table named `tableName` (on-demand billing). */
export function tableDefinition(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [
      { AttributeName: TABLE_KEYS.pk, AttributeType: 'S' },
      { AttributeName: TABLE_KEYS.sk, AttributeType: 'S' },
      { AttributeName: GSI1.pk, AttributeType: 'S' },
      { AttributeName: GSI1.sk, AttributeType: 'S' },
    ],
    KeySchema: [
      { AttributeName: TABLE_KEYS.pk, KeyType: 'HASH' },
      { AttributeName: TABLE_KEYS.sk, KeyType: 'RANGE' },
    ],
    GlobalSecondaryIndexes: [
      {
        IndexName: GSI1.name,
        KeySchema: [
          { AttributeName: GSI1.pk, KeyType: 'HASH' },
          { AttributeName: GSI1.sk, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
    ],
  };
}

/**
 * Key shapes of every item kind. A newcomer looking for "where does X live in DynamoDB" reads this.
 *
 * | item      | pk                 | sk                  | gsi1pk          | gsi1sk                   |
 * |-----------|--------------------|---------------------|-----------------|--------------------------|
 * | account   | ACCT#<acct>        | ACCT                |                 |                          |
 * | sign-out  | ACCT#<acct>        | SESSEND#<session>   |                 |                          |
 * | invite    | INVITE#<code>      | INVITE              |                 |                          |
 * | project   | PRJ#<prj>          | PRJ                 | ACCT#<acct>     | PRJ#<created_at>#<prj>   |
 * | deletion  | PRJ#<prj>          | GONE                | DELETING#<agt>  | <prj>  (while deleting)  |
 * | agent     | AGENT#<agt>        | AGENT               | AGENTS          | <agt>                    |
 * | receipt   | PRJ#<prj>          | RCPT#<at>#<rcpt>    |                 |                          |
 * | snapshot  | PRJ#<prj>          | SNAP#<snap>         |                 |                          |
 * | secret    | PRJ#<prj>          | SECRET#<name>       |                 |                          |
 * | key       | PRJ#<prj>          | KEY#<key_id>        |                 |                          |
 * | key-by-id | KEY#<key_id>       | KEY                 |                 |                          |
 * | bucket    | PRJ#<prj>          | BKT#<bucket>        |                 |                          |
 * | object    | PRJ#<prj>          | OBJ#<bucket>#<part> |                 |                          |
 * | blob-del  | PRJ#<prj>          | BLOBDEL#<bucket>#<blob> |             |                          |
 * | upload    | PRJ#<prj>          | UPL#<upl>           | UPLOADS#<agt>   | <prj>#<upl>              |
 * | function  | PRJ#<prj>          | FN#<name>           |                 |                          |
 * | fn-version| PRJ#<prj>          | FNV#<name>#<gen>#<v>|                 |                          |
 * | rt-ticket | RTT#<sha256>       | RTT                 |                 |                          |
 *
 * Everything a project owns lives in its partition `PRJ#<prj>` under its own sort-key prefix.
 * An object's `<part>` is its key, or for keys over 923 UTF-8 bytes a prefix, a marker and a hash
 * (sort keys hold 1024 bytes): shared/db/catalog-keys.ts.
 */
/**
 * The prefixes of every key shape above, named once: `keys` builds whole keys from them, and the
 * repository modules' `begins_with` queries and checks of a sort key name them from here.
 */
export const prefixes = {
  account: 'ACCT#',
  sessionEnd: 'SESSEND#',
  invite: 'INVITE#',
  project: 'PRJ#',
  deleting: 'DELETING#',
  agent: 'AGENT#',
  receipt: 'RCPT#',
  snapshot: 'SNAP#',
  secret: 'SECRET#',
  key: 'KEY#',
  bucket: 'BKT#',
  object: 'OBJ#',
  blobDeletion: 'BLOBDEL#',
  /** A resumable upload (shared/db/uploads.ts, docs/storage.md "Resumable uploads"). */
  upload: 'UPL#',
  /** The index partition of the resumable uploads of one agent's projects (their expiry sweep). */
  uploadsOn: 'UPLOADS#',
  fn: 'FN#',
  fnVersion: 'FNV#',
  realtimeTicket: 'RTT#',
} as const;

export const keys = {
  account: (accountId: string) => ({ pk: `${prefixes.account}${accountId}`, sk: 'ACCT' }),
  /** A signed-out session of the account (docs/api.md "Sessions"); dropped by TTL once the token has expired. */
  sessionEnd: (accountId: string, sessionId: string) => ({ pk: `${prefixes.account}${accountId}`, sk: `${prefixes.sessionEnd}${sessionId}` }),
  invite: (code: string) => ({ pk: `${prefixes.invite}${code}`, sk: 'INVITE' }),
  project: (projectId: string) => ({ pk: `${prefixes.project}${projectId}`, sk: 'PRJ' }),
  /** The record of a deleted project (shared/db/project-delete.ts), which replaces the project item. */
  projectDeletion: (projectId: string) => ({ pk: `${prefixes.project}${projectId}`, sk: 'GONE' }),
  /** Index partition of the deletions an agent has still to finish (docs/lifecycle.md "Deleting a project"). */
  deletingOn: (agentId: string) => `${prefixes.deleting}${agentId}`,
  projectsOf: (accountId: string) => `${prefixes.account}${accountId}`,
  agent: (agentId: string) => ({ pk: `${prefixes.agent}${agentId}`, sk: 'AGENT' }),
  agents: 'AGENTS',
  receipt: (projectId: string, at: string, receiptId: string) => ({ pk: `${prefixes.project}${projectId}`, sk: `${prefixes.receipt}${at}#${receiptId}` }),
  /** Snapshot ids are time-ordered (shared/db/snapshots.ts), so this sort key lists by creation. */
  snapshot: (projectId: string, snapshotId: string) => ({ pk: `${prefixes.project}${projectId}`, sk: `${prefixes.snapshot}${snapshotId}` }),
  secret: (projectId: string, name: string) => ({ pk: `${prefixes.project}${projectId}`, sk: `${prefixes.secret}${name}` }),
  projectKey: (projectId: string, keyId: string) => ({ pk: `${prefixes.project}${projectId}`, sk: `${prefixes.key}${keyId}` }),
  keyLookup: (keyId: string) => ({ pk: `${prefixes.key}${keyId}`, sk: 'KEY' }),
  bucket: (projectId: string, bucket: string) => ({ pk: `${prefixes.project}${projectId}`, sk: `${prefixes.bucket}${bucket}` }),
  upload: (projectId: string, uploadId: string) => ({ pk: `${prefixes.project}${projectId}`, sk: `${prefixes.upload}${uploadId}` }),
  /** Index partition of the resumable uploads of the projects an agent hosts. */
  uploadsOn: (agentId: string) => `${prefixes.uploadsOn}${agentId}`,
  /** Catalog rows: sort key `OBJ#<bucket>#<key part>`, built by shared/db/catalog-keys.ts (1024-byte limit). */
  objectsOf: (projectId: string) => ({ pk: `${prefixes.project}${projectId}` }),
  /** A function's current version (shared/db/functions.ts). */
  fn: (projectId: string, name: string) => ({ pk: `${prefixes.project}${projectId}`, sk: `${prefixes.fn}${name}` }),
  /**
   * One deployed version of a function: `<gen>` is the generation of the function it belongs to (a
   * function deleted and deployed again starts a new one), `<v>` the version zero-padded to 10 digits
   * so the sort key orders versions.
   */
  fnVersion: (projectId: string, name: string, generation: string, version: number) => ({
    pk: `${prefixes.project}${projectId}`,
    sk: `${prefixes.fnVersion}${name}#${generation}#${String(version).padStart(10, '0')}`,
  }),
  /** A realtime ticket, by the SHA-256 of its secret (shared/db/realtime-tickets.ts): the table never holds a usable ticket. */
  realtimeTicket: (hash: string) => ({ pk: `${prefixes.realtimeTicket}${hash}`, sk: 'RTT' }),
} as const;
