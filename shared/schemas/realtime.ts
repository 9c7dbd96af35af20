/**
 * Realtime inputs both sides check (the interface contract "POST realtime/publish", "Limits";
 * docs/realtime.md): channel and event names, the reserved `system` channel, the publish body and the
 * subscribe query.
 */
import { z } from 'zod';
import { timestampSchema } from './common.ts';

/** Channel names (the interface contract "Limits"). */
export const CHANNEL_PATTERN = /^[a-z0-9._-]{1,64}$/;
/** Event names (the interface contract "Limits"). */
export const EVENT_PATTERN = /^[a-zA-Z0-9._:-]{1,64}$/;
/** The channel reserved for lifecycle events the service emits (the interface contract "Events" 4). */
export const SYSTEM_CHANNEL = 'system';

/** A channel name. */
export const channelSchema = z.string().regex(CHANNEL_PATTERN, 'must match ^[a-z0-9._-]{1,64}$');
/** An event name. */
export const eventNameSchema = z.string().regex(EVENT_PATTERN, 'must match ^[a-zA-Z0-9._:-]{1,64}$');

/** Body of POST realtime/publish. `payload` is optional and delivered as `null` when absent (ours). */
export const publishRequestSchema = z.strictObject({
  channel: channelSchema.refine((c) => c !== SYSTEM_CHANNEL, 'system is reserved for service lifecycle events'),
  event: eventNameSchema,
  payload: z.unknown().optional(),
});
/** A publish body as parsed. */
export type PublishRequest = z.output<typeof publishRequestSchema>;

/**
 * Query of subscribe: `channel`, repeatable, and `ticket` (a browser's single-use credential,
 * docs/realtime.md "Browsers: tickets"; its shape is judged as a credential, 401, not here), and
 * nothing else (the public route refuses any other parameter: handlers/http.ts `queryOf`).
 * Duplicates collapse.
 */
export const subscribeQuerySchema = z.strictObject({
  channel: z
    .array(channelSchema)
    .optional()
    .transform((v) => [...new Set(v ?? [])]),
  ticket: z.string().optional(),
});

/** A realtime ticket: `rtt_` + 64 hex from the platform CSPRNG (ours). */
export const TICKET_PATTERN = /^rtt_[0-9a-f]{64}$/;

/** How long a ticket may wait for its subscription, in seconds (docs/realtime.md "Browsers: tickets"). */
export const TICKET_TTL_SECONDS = 60;

/**
 * Query parameters that would carry a long-lived credential in a URL. Refused by name with a
 * message saying why, instead of the generic "not a known query parameter" (docs/realtime.md).
 */
export const URL_CREDENTIAL_PARAMS = ['token', 'key', 'access_token', 'apikey', 'api_key', 'authorization', 'bearer'] as const;

/** Body of POST realtime/tickets: the channels the ticket grants (1 to 32 distinct; `system` allowed). */
export const ticketRequestSchema = z.strictObject({
  channels: z
    .array(channelSchema)
    .min(1, 'at least one channel is required')
    .transform((v) => [...new Set(v)])
    .refine((v) => v.length <= 32, 'at most 32 channels per ticket'),
});
/** A ticket request as parsed. */
export type TicketRequest = z.output<typeof ticketRequestSchema>;

/** The answer of POST realtime/tickets. */
export const realtimeTicketSchema = z.object({
  ticket: z.string().regex(TICKET_PATTERN),
  project: z.string(),
  channels: z.array(channelSchema),
  expires_at: z.string(),
  subscribe_url: z.string(),
});
/** A ticket as answered. */
export type RealtimeTicket = z.output<typeof realtimeTicketSchema>;

/** A realtime event as delivered (the interface contract "Realtime event as delivered"). */
export const realtimeEventSchema = z.object({
  id: z.int().min(1),
  channel: z.string(),
  event: z.string(),
  payload: z.unknown(),
  ts: timestampSchema,
});
