/**
 * Repository: realtime tickets (docs/realtime.md "Browsers: tickets"). A ticket is one item
 * `RTT#<sha256 of the ticket>` / `RTT` (table.ts): the table holds the ticket's hash, never the
 * ticket, so reading the table gives nobody a usable one.
 *
 * Redeeming is one conditional delete: the item goes away only when it still exists, names the
 * project, has not expired and covers every asked channel, so of two uses — on any number of handler
 * instances — exactly one succeeds. An item that was never redeemed stays until the table's
 * time-to-live drops it (`TTL_ATTRIBUTE`, set to its expiry).
 */
import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { Db } from './client.ts';
import { isConditionFailure } from './client.ts';
import { keys, TTL_ATTRIBUTE } from './table.ts';

/** A ticket as stored. */
export interface TicketRecord {
  /** SHA-256 of the ticket, hex. */
  hash: string;
  project: string;
  /** The channels it grants (distinct). */
  channels: string[];
  /** The project key it was issued to (its subscription ends when that key is revoked), or null: the owner's session. */
  key_id: string | null;
  created_at: string;
  /** Milliseconds since the epoch after which it is refused. */
  expires_at_ms: number;
}

/** Why a ticket could not be redeemed. */
export type TicketRefusal = 'unknown' | 'expired' | 'other_project' | 'channels';

/** Stores a new ticket; a hash collision (never, with 256 random bits) overwrites nothing. */
export async function putTicket(db: Db, ticket: TicketRecord): Promise<void> {
  await db.doc.send(
    new PutCommand({
      TableName: db.table,
      Item: {
        ...keys.realtimeTicket(ticket.hash),
        type: 'rt-ticket',
        project: ticket.project,
        channels: ticket.channels,
        key_id: ticket.key_id,
        created_at: ticket.created_at,
        expires_at_ms: ticket.expires_at_ms,
        [TTL_ATTRIBUTE]: Math.ceil(ticket.expires_at_ms / 1000),
      },
      ConditionExpression: 'attribute_not_exists(pk)',
    }),
  );
}

/**
 * Redeems a ticket for `project` and `channels` at `now`: deletes it and answers what it held, or
 * answers why it was refused (a refused ticket is left as it was, except that one already used is
 * gone). Atomic: of concurrent redemptions of one ticket, one gets the record.
 */
export async function redeemTicket(
  db: Db,
  hash: string,
  want: { project: string; channels: readonly string[]; now: number },
): Promise<{ ticket: TicketRecord } | { refused: TicketRefusal }> {
  const names: Record<string, string> = { '#project': 'project', '#channels': 'channels', '#exp': 'expires_at_ms' };
  const values: Record<string, unknown> = { ':project': want.project, ':now': want.now };
  const covers = want.channels.map((channel, i) => {
    values[`:c${i}`] = channel;
    return `contains(#channels, :c${i})`;
  });
  try {
    const out = await db.doc.send(
      new DeleteCommand({
        TableName: db.table,
        Key: keys.realtimeTicket(hash),
        ConditionExpression: ['attribute_exists(pk)', '#project = :project', '#exp > :now', ...covers].join(' AND '),
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ReturnValues: 'ALL_OLD',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
    );
    return { ticket: recordOf(hash, out.Attributes ?? {}) };
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    const item = (err as { Item?: Record<string, unknown> }).Item;
    if (!item) return { refused: 'unknown' };
    const held = recordOf(hash, unmarshalled(item));
    if (held.expires_at_ms <= want.now) return { refused: 'expired' };
    if (held.project !== want.project) return { refused: 'other_project' };
    return { refused: 'channels' };
  }
}

function recordOf(hash: string, item: Record<string, any>): TicketRecord {
  return {
    hash,
    project: String(item.project ?? ''),
    channels: Array.isArray(item.channels) ? item.channels.map(String) : [],
    key_id: typeof item.key_id === 'string' ? item.key_id : null,
    created_at: String(item.created_at ?? ''),
    expires_at_ms: Number(item.expires_at_ms ?? 0),
  };
}

/**
 * The item a failed condition returns comes in DynamoDB's attribute-value form (the document
 * client does not convert errors): the few shapes a ticket uses, converted here.
 */
function unmarshalled(item: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(item)) out[name] = plain(value);
  return out;
}

function plain(value: unknown): unknown {
  const v = value as { S?: string; N?: string; L?: unknown[]; NULL?: boolean } | null;
  if (!v || typeof v !== 'object') return value;
  if (v.S !== undefined) return v.S;
  if (v.N !== undefined) return Number(v.N);
  if (v.L !== undefined) return v.L.map(plain);
  if (v.NULL) return null;
  return undefined;
}
