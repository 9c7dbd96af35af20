/**
 * Function secrets inputs (the interface contract "PUT functions/secrets"; docs/secrets.md).
 */
import { z } from 'zod';
import { RESERVED_ENV_NAMES, SECRET_NAME_PATTERN } from '../db/secrets.ts';
import { timestampSchema } from './common.ts';
import { pageAnswerSchema } from './pagination.ts';

/** Longest value, in characters (Unicode code points), per the contract's "Limits". */
export const SECRET_VALUE_MAX_CHARS = 4096;

const reserved: readonly string[] = RESERVED_ENV_NAMES;

/** `{name}`: the contract's pattern, and not one of the names the service sets itself. */
export const secretNameSchema = z
  .string()
  .regex(SECRET_NAME_PATTERN, 'must match ^[A-Z][A-Z0-9_]{0,63}$')
  .refine((n) => !reserved.includes(n), { message: `is reserved: ${RESERVED_ENV_NAMES.join(', ')} are set by the service` });

// A lone surrogate (reachable through a JSON "\ud800" escape) has no UTF-8 encoding.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * `value`: UTF-8, no NUL, at most 4096 characters. Every message here is fixed text: none quotes the
 * value, not even in part.
 */
export const secretValueSchema = z
  .string()
  .refine((v) => v.length <= SECRET_VALUE_MAX_CHARS * 2 && [...v].length <= SECRET_VALUE_MAX_CHARS, {
    message: `must be at most ${SECRET_VALUE_MAX_CHARS} characters`,
    abort: true,
  })
  .refine((v) => !v.includes('\0'), { message: 'must not contain NUL', abort: true })
  .refine((v) => !LONE_SURROGATE.test(v), { message: 'must be valid UTF-8 (no lone surrogates)' });

/** Body of PUT functions/secrets/{name}. */
export const putSecretRequestSchema = z.strictObject({ value: secretValueSchema });

// Internal API (handlers → host agent)

/** Function names (not in the contract; ours): a letter, then letters, digits, `_` or `-`, at most 64. */
export const functionNameSchema = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_-]{0,63}$/, 'must match ^[A-Za-z][A-Za-z0-9_-]{0,63}$');

/** The public origin of the service as the function should see it: `scheme://host[:port]`, nothing more. */
export const cloudOriginSchema = z
  .string()
  .max(2048, 'is too long')
  .refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol) && new URL(v).origin === v, {
    message: 'must be an http(s) origin such as https://api.example.com (no path, no trailing slash)',
  });

/** Body of `POST /internal/v1/projects/{id}/function-env`. */
export const functionEnvRequestSchema = z.strictObject({
  function_name: functionNameSchema,
  cloud_origin: cloudOriginSchema,
});

// Answers

/** Function secret metadata (the interface contract "Function secret (metadata)"): never the value. */
export const secretMetadataSchema = z.object({
  project: z.string().regex(/^prj_[0-9a-f]{16}$/),
  name: z.string().regex(SECRET_NAME_PATTERN),
  version: z.int().min(1),
  created_at: timestampSchema,
  updated_at: timestampSchema,
});

/** Answer of `GET …/functions/secrets`. */
export const secretListSchema = pageAnswerSchema('secrets', secretMetadataSchema);
