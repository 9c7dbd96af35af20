/** The health answer (docs/api.md "Decisions": health). */
import { z } from 'zod';
import { errorEnvelopeSchema, timestampSchema } from './common.ts';

/** Registered host agents: live (can run tenants) and total; null when the registry cannot be read. */
const agentsSchema = z.object({ live: z.int().min(0), total: z.int().min(0) }).nullable();

/** 200: at least one live host agent. */
export const healthAnswerSchema = z.object({ status: z.literal('ok'), time: timestampSchema, agents: agentsSchema });

/** 503: no live host agent; the error envelope beside the same figures. */
export const degradedHealthAnswerSchema = errorEnvelopeSchema(['orchestrator_unavailable']).extend({
  status: z.literal('degraded'),
  time: timestampSchema,
  agents: agentsSchema,
});
