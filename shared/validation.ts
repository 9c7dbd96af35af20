/**
 * Turning zod failures into 400 `invalid_request` errors in the project's own words, naming the
 * field (`limit: must be a whole number from 1 to 1000`, `foo: is not a known field`); the
 * validator's own wording never reaches a client (docs/api.md "Errors").
 */
import type { z } from 'zod';
import { errors, type ServiceError } from './errors.ts';

/** Longest field name a message quotes; a longer (unknown) one is cut, so a message stays short. */
const NAME_MAX = 64;

/** A field name as messages show it: bare when it is a plain identifier, else JSON-quoted (and cut). */
export function fieldName(name: string): string {
  const cut = name.length > NAME_MAX ? `${name.slice(0, NAME_MAX)}…` : name;
  return /^[A-Za-z_][A-Za-z0-9_.-]*$/.test(cut) ? cut : JSON.stringify(cut);
}

function pathOf(path: readonly PropertyKey[], root: string): string {
  if (path.length === 0) return root;
  return path.map((p) => (typeof p === 'number' ? `[${p}]` : fieldName(String(p)))).join('.').replace(/\.\[/g, '[');
}

const ARTICLE: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  object: 'a JSON object',
  array: 'an array',
  null: 'null',
};

function atLeast(origin: string, n: number | bigint): string {
  if (origin === 'string') return `must be at least ${n} character${n === 1 ? '' : 's'}`;
  if (origin === 'array' || origin === 'set') return `must have at least ${n} item${n === 1 ? '' : 's'}`;
  return `must be at least ${n}`;
}

function atMost(origin: string, n: number | bigint): string {
  if (origin === 'string') return `must be at most ${n} character${n === 1 ? '' : 's'}`;
  if (origin === 'array' || origin === 'set') return `must have at most ${n} item${n === 1 ? '' : 's'}`;
  return `must be at most ${n}`;
}

/**
 * The problem of one zod issue in the project's words, for issues whose schema gave no message of
 * its own (zod's per-parse error map: a schema's own message still wins).
 */
export function problemOf(issue: z.core.$ZodRawIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'is required';
      return `must be ${ARTICLE[issue.expected] ?? `a ${issue.expected}`}`;
    case 'too_small':
      return atLeast(issue.origin, issue.minimum);
    case 'too_big':
      return atMost(issue.origin, issue.maximum);
    case 'invalid_format':
      return issue.format === 'regex' && issue.pattern ? `must match ${String(issue.pattern).replace(/^\/|\/[a-z]*$/g, '')}` : `must be a valid ${issue.format}`;
    case 'invalid_value':
      return issue.values.length === 1
        ? `must be ${JSON.stringify(issue.values[0])}`
        : `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'unrecognized_keys':
      return 'is not a known field';
    default:
      return 'is not valid';
  }
}

/**
 * The message of a zod error: one issue as "field: problem" (`root` names the value itself, e.g.
 * `body`). Unknown fields are told first: a misspelt field also makes the intended one "required",
 * and the misspelling is the thing to fix.
 */
export function describeZodError(error: z.ZodError, root = 'body'): string {
  const issue = error.issues.find((i) => i.code === 'unrecognized_keys') ?? error.issues[0];
  if (!issue) return `${root}: is not valid`;
  if (issue.code === 'unrecognized_keys') {
    const names = issue.keys.map((k) => pathOf([...issue.path, k], root));
    return names.length === 1 ? `${names[0]}: is not a known field` : `${names.join(', ')}: are not known fields`;
  }
  return `${pathOf(issue.path, root)}: ${issue.message}`;
}

/** Parses `value` with `schema` or throws 400 naming the offending field (`root` for the value itself). */
export function parseOr400<S extends z.ZodType>(schema: S, value: unknown, root = 'body'): z.output<S> {
  const out = schema.safeParse(value, { error: problemOf });
  if (!out.success) throw errors.invalid(describeZodError(out.error, root)) as ServiceError;
  return out.data;
}
