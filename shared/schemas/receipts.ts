/** Receipts as answered (docs/api.md "Decisions": receipts). */
import { z } from 'zod';
import { ID_PATTERNS } from '../ids.ts';
import { timestampSchema } from './common.ts';
import { pageAnswerSchema } from './pagination.ts';

/** A receipt: who changed what, in which request, when; a target names, never holds, a value. */
export const receiptSchema = z.object({
  id: z.string().regex(ID_PATTERNS.rcpt),
  project: z.string().regex(ID_PATTERNS.prj),
  /** `<resource>.<verb>`: `object.put`, `object.delete`, `secret.put`, `secret.delete`, … */
  op: z.string().regex(/^[a-z]+\.[a-z]+$/),
  target: z.string(),
  actor: z.string(),
  request_id: z.string(),
  at: timestampSchema,
});

/** Answer of `GET …/receipts`, newest first. */
export const receiptListSchema = pageAnswerSchema('receipts', receiptSchema);
