/**
 * Function secrets inputs (the interface contract "PUT functions/secrets"; docs/secrets.md).
 */
import { z } from 'zod';

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
