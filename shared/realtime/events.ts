/**
 * The realtime rules both sides apply (the interface contract "Realtime event as delivered",
 * "Limits"; docs/realtime.md): the 32 KiB payload limit, the channels of one subscription, the event
 * stream's headers. The input schemas are in shared/schemas/realtime.ts. Web-standard only: the
 * handlers import it.
 */
import type { TicketRefusal } from '../db/realtime-tickets.ts';
import { errors, type ServiceError } from '../errors.ts';
import { subscribeQuerySchema, TICKET_TTL_SECONDS, URL_CREDENTIAL_PARAMS } from '../schemas/realtime.ts';
import { parseOr400 } from '../validation.ts';

/** Payload limit: at most 32 KiB as JSON (UTF-8 bytes of its serialisation). */
export const PAYLOAD_MAX_BYTES = 32 * 1024;
/** Most distinct channels one subscription may name (ours; docs/realtime.md). */
export const MAX_CHANNELS_PER_SUBSCRIPTION = 32;

/** Response headers of every event stream (agent and handlers alike). */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  // Tells buffering reverse proxies (nginx and friends) to pass each frame through at once.
  'x-accel-buffering': 'no',
};

/** Lifecycle events the service emits on `system` (docs/realtime.md). */
export const SYSTEM_EVENTS = ['project.running', 'project.sleeping', 'snapshot.created', 'project.restored'] as const;
export type SystemEvent = (typeof SYSTEM_EVENTS)[number];

/** Realtime event as delivered (contract "Realtime event as delivered"). */
export interface RealtimeEvent {
  id: number;
  channel: string;
  event: string;
  payload: unknown;
  ts: string;
}

const utf8 = new TextEncoder();

/**
 * Serialises a payload once and enforces the 32 KiB limit (413 `payload_too_large`); answers the
 * JSON text so the hub never serialises it again.
 */
export function payloadJson(payload: unknown): string {
  const text = JSON.stringify(payload === undefined ? null : payload);
  // Each UTF-16 unit is at most 3 UTF-8 bytes: most payloads are decided without encoding them.
  if (text.length * 3 > PAYLOAD_MAX_BYTES && utf8.encode(text).byteLength > PAYLOAD_MAX_BYTES) {
    throw errors.tooLarge(`payload: exceeds ${PAYLOAD_MAX_BYTES} bytes as JSON`);
  }
  return text;
}

/** Checks the channels of one subscription: at least one, at most 32 (each already matches the pattern). */
export function subscriptionChannels(channels: string[]): string[] {
  if (channels.length === 0) throw errors.invalid('channel: at least one channel is required (?channel=name, repeatable)');
  if (channels.length > MAX_CHANNELS_PER_SUBSCRIPTION) {
    throw errors.invalid(`channel: at most ${MAX_CHANNELS_PER_SUBSCRIPTION} channels per subscription`);
  }
  return channels;
}

/**
 * The channels of a subscribe URL, other parameters aside: the agent's internal route reads
 * `key_id` beside them, and the handlers have refused unknown ones already.
 */
export function subscribeChannels(url: URL): string[] {
  const { channel } = parseOr400(subscribeQuerySchema, { channel: url.searchParams.getAll('channel') }, 'query');
  return subscriptionChannels(channel);
}

/**
 * Refuses a long-lived credential in a subscribe URL by name (docs/realtime.md "Browsers: tickets"):
 * URLs end up in logs, proxies and browser history, so a session or key there is never read. The
 * value is not echoed.
 */
export function refuseUrlCredentials(url: URL): void {
  for (const name of URL_CREDENTIAL_PARAMS) {
    if (url.searchParams.has(name)) {
      throw errors.invalid(`${name}: credentials are not accepted in a URL; send Authorization: Bearer, or use a realtime ticket (POST .../realtime/tickets)`);
    }
  }
}

/** The answer to a ticket DynamoDB refused to redeem (docs/realtime.md "Browsers: tickets"): 401, or 403 for one of another project or channels. */
export function ticketRefusal(refused: TicketRefusal): ServiceError {
  switch (refused) {
    case 'unknown':
      return errors.unauthenticated('ticket: unknown or already used; a ticket opens one subscription');
    case 'expired':
      return errors.unauthenticated(`ticket: expired (a ticket must be used within ${TICKET_TTL_SECONDS} s of issue)`);
    case 'other_project':
      return errors.denied('ticket: was issued for another project');
    case 'channels':
      return errors.denied('ticket: does not grant every channel asked for; ask for a ticket naming them');
  }
}
