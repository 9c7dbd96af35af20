/** The query of every paginated list: `limit` and `cursor`, nothing else (docs/api.md "Decisions"). */
import { z } from 'zod';

/** The one message of a bad `limit`. */
export const LIMIT_PROBLEM = 'must be a whole number from 1 to 1000';

/** `limit` of a list, as query text: a whole number from 1 to 1000. */
export const limitSchema = z
  .string()
  .refine((s) => /^\d{1,16}$/.test(s) && Number(s) >= 1 && Number(s) <= 1000, LIMIT_PROBLEM)
  .transform(Number)
  .meta({ description: 'page size: a whole number from 1 to 1000 (default 100)' });

/**
 * `cursor` of a list, as sent: opened (and judged) by shared/cursors.ts. Anything longer than any
 * cursor the service issues is not one of them.
 */
export const cursorSchema = z
  .string()
  .max(16 * 1024, 'is not valid')
  .meta({ description: 'the `next_cursor` of the previous page' });

/** Query of every paginated list. */
export const pageQuerySchema = z.strictObject({
  limit: limitSchema.optional(),
  cursor: cursorSchema.optional(),
});

/**
 * A page of a list as answered: the items under `key` and `next_cursor`, null exactly when the
 * page ends the list (docs/api.md "Decisions").
 */
export function pageAnswerSchema<K extends string, T extends z.ZodType>(key: K, item: T) {
  return z.object({ [key]: z.array(item), next_cursor: z.string().nullable() } as { [P in K]: z.ZodArray<T> } & { next_cursor: z.ZodNullable<z.ZodString> });
}
