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
 * Query of subscribe: `channel`, repeatable, and nothing else (the public route refuses any other
 * parameter: handlers/http.ts `queryOf`). Duplicates collapse.
 */
export const subscribeQuerySchema = z.strictObject({
  channel: z
    .array(channelSchema)
    .optional()
    .transform((v) => [...new Set(v ?? [])]),
});

/** A realtime event as delivered (the interface contract "Realtime event as delivered"). */
export const realtimeEventSchema = z.object({
  id: z.int().min(1),
  channel: z.string(),
  event: z.string(),
  payload: z.unknown(),
  ts: timestampSchema,
});
