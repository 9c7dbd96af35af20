/**
 * Project key inputs (the interface contract "Project keys"; docs/dataplane.md "Keys"): the key id, and the body
 * of the host agent's internal invalidation route.
 */
import { z } from 'zod';
import { KEY_ID_PATTERN } from '../ids.ts';
import { timestampSchema } from './common.ts';
import { labelSchema } from './labels.ts';
import { pageAnswerSchema } from './pagination.ts';
import { projectIdSchema } from './projects.ts';

/** A project key's id: the 32 hex digits a `svc1_` key carries (shared/auth.ts). */
export const keyIdSchema = z.string().regex(KEY_ID_PATTERN, 'must match ^[0-9a-f]{32}$');

/** `POST keys` body: an optional label, string or null, at most 64 characters. */
export const createKeyRequestSchema = z.strictObject({ label: labelSchema.optional() });

// Internal API (handlers → host agent)

/** Body of `POST /internal/v1/keys/{key_id}/invalidate`. */
export const invalidateKeyRequestSchema = z.strictObject({ project_id: projectIdSchema });

// Answers

/** A project key as listed and revoked: never the secret (the interface contract "Project key"). */
export const keySchema = z.object({
  key_id: keyIdSchema,
  label: z.string().nullable(),
  created_at: timestampSchema,
  revoked_at: timestampSchema.nullable(),
});

/** Answer of `POST keys`: the one answer that carries the secret `key`. */
export const issuedKeySchema = z.object({
  key_id: keyIdSchema,
  key: z.string().regex(/^svc1_[0-9a-f]{32}_[0-9a-f]{64}$/),
  label: z.string().nullable(),
  created_at: timestampSchema,
});

/** Answer of `GET keys`. */
export const keyListSchema = pageAnswerSchema('keys', keySchema);
