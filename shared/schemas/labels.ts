/** Free text the service keeps as given: names' blank rule and the labels of keys and snapshots (docs/api.md "Decisions"). */
import { z } from 'zod';

/** True when `s` holds nothing but whitespace (Unicode White_Space, as JavaScript's `\s`). */
export function isBlank(s: string): boolean {
  return /^\s*$/u.test(s);
}

/** Labels of keys and snapshots: string or null, at most 64 characters, not blank (null says "no label"). */
export const labelSchema = z
  .string({ error: (issue) => (issue.input === undefined ? undefined : 'must be a string or null') })
  .max(64, 'must be at most 64 characters')
  .refine((s) => !isBlank(s), 'must not be blank')
  .nullable();
