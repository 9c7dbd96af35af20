/**
 * The engine-logs route (docs/observability.md "Engine logs"): its query, its JSON answer, and the
 * internal route's query on the host agent, which takes the same parameters.
 */
import { z } from 'zod';
import { ID_PATTERNS } from '../ids.ts';

/** Most lines one answer (or the start of a stream) carries. */
export const LOGS_TAIL_MAX = 10_000;
/** Lines answered when `tail` is not given. */
export const LOGS_TAIL_DEFAULT = 100;

/** `tail`, as query text: a whole number from 1 to 10000. */
const tailSchema = z
  .string()
  .refine((s) => /^\d{1,6}$/.test(s) && Number(s) >= 1 && Number(s) <= LOGS_TAIL_MAX, `must be a whole number from 1 to ${LOGS_TAIL_MAX}`)
  .transform(Number)
  .meta({ description: `lines: a whole number from 1 to ${LOGS_TAIL_MAX} (default ${LOGS_TAIL_DEFAULT})` });

/** `follow`, as query text: `1`/`true` streams, `0`/`false` (or absent) answers once. */
const followSchema = z
  .enum(['1', '0', 'true', 'false'], { error: 'must be 1, 0, true or false' })
  .transform((v) => v === '1' || v === 'true')
  .meta({ description: '`1` or `true`: stream the tail, then each new line, as Server-Sent Events' });

/** Query of `GET /v0/projects/{id}/logs` (and of the agent's internal route). */
export const logsQuerySchema = z.strictObject({
  tail: tailSchema.optional(),
  follow: followSchema.optional(),
});

/** The JSON answer: the last lines of the engine log, oldest first, without their line ends. */
export const logsAnswerSchema = z.object({
  project: z.string().regex(ID_PATTERNS.prj),
  lines: z.array(z.string()),
});
/** The JSON answer as a type. */
export type LogsAnswer = z.output<typeof logsAnswerSchema>;
