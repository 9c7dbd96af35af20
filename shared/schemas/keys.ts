/**
 * Project key inputs (the interface contract "Project keys"; docs/dataplane.md "Keys"): the key id, and the body
 * of the host agent's internal invalidation route.
 */
import { z } from 'zod';
import { KEY_ID_PATTERN } from '../ids.ts';
import { labelSchema } from './labels.ts';
import { projectIdSchema } from './projects.ts';

/** A project key's id: the 32 hex digits a `svc1_` key carries (shared/auth.ts). */
export const keyIdSchema = z.string().regex(KEY_ID_PATTERN, 'must match ^[0-9a-f]{32}$');

/** `POST keys` body: an optional label, string or null, at most 64 characters. */
export const createKeyRequestSchema = z.strictObject({ label: labelSchema.optional() });

// Internal API (handlers → host agent)

/** Body of `POST /internal/v1/keys/{key_id}/invalidate`. */
export const invalidateKeyRequestSchema = z.strictObject({ project_id: projectIdSchema });
