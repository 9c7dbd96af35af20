/** Turning zod failures into 400 `invalid_request` errors whose message names the field. */
import type { z } from 'zod';
import { errors, type ServiceError } from './errors.ts';

/** The first issue of a zod error as "field: problem" (or "body: problem" at the top level). */
export function describeZodError(error: z.ZodError, root = 'body'): string {
  const issue = error.issues[0];
  if (!issue) return `${root}: invalid`;
  const field = issue.path.length ? issue.path.map(String).join('.') : root;
  let message = issue.message;
  if (issue.code === 'unrecognized_keys') return `${root}: unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
  if (issue.code === 'invalid_type' && /received undefined/.test(message)) message = 'is required';
  return `${field}: ${message}`;
}

/** Parses `value` with `schema` or throws 400 naming the offending field. */
export function parseOr400<S extends z.ZodType>(schema: S, value: unknown, root = 'body'): z.output<S> {
  const out = schema.safeParse(value);
  if (!out.success) throw errors.invalid(describeZodError(out.error, root)) as ServiceError;
  return out.data;
}
