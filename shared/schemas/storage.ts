/**
 * Storage inputs: bucket names, object keys, content types and the ticket, delete and list
 * requests (the interface contract "Bucket record", "Object catalog row", "Limits"; docs/storage.md),
 * and the answers.
 */
import { z } from 'zod';
import { ID_PATTERNS } from '../ids.ts';
import { stringMapSchema, timestampSchema } from './common.ts';
import { pageAnswerSchema, pageQuerySchema } from './pagination.ts';

/** Bucket name: S3-compatible, the same on every backend. */
export const bucketNameSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/, 'must match ^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$');

/**
 * Object key: 1 to 1024 characters (Unicode code points), any of them, but well-formed Unicode and
 * not `.` or `..` alone: no URL can carry those as a path segment (clients collapse them, even
 * percent-encoded), so such an object could never be uploaded or read.
 */
export const objectKeySchema = z
  .string()
  .min(1, 'must be 1 to 1024 characters')
  .refine((k) => !hasLoneSurrogate(k), 'must be valid Unicode (no lone surrogate)')
  .refine((k) => codePoints(k) <= 1024, 'must be at most 1024 characters')
  .refine((k) => k !== '.' && k !== '..', 'must not be "." or ".."');

/** A content type: 1 to 255 characters that can travel in a header (visible ASCII, space, tab). */
export const contentTypeSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(255, 'must be at most 255 characters')
  .regex(/^[\x21-\x7e][\t\x20-\x7e]*$/, 'must be printable ASCII');

/** Body of `POST …/storage/uploads`. */
export const uploadTicketRequestSchema = z.strictObject({
  bucket: bucketNameSchema,
  key: objectKeySchema,
  content_type: contentTypeSchema.nullable().optional(),
});

/**
 * Body of `POST …/storage/downloads`: `signed: true` asks for a signed URL as well, valid for
 * `expires_in` seconds (default the ticket lifetime, at most `SVCD_SIGNED_URL_MAX_SECONDS`).
 */
export const downloadTicketRequestSchema = z
  .strictObject({
    bucket: bucketNameSchema,
    key: objectKeySchema,
    signed: z.boolean().optional(),
    expires_in: z.int('must be a whole number of seconds').min(1, 'must be at least 1 second').optional(),
  })
  .refine((b) => b.expires_in === undefined || b.signed === true, { path: ['expires_in'], message: 'is only taken with signed: true' });

/** Body of `DELETE …/storage/objects`. */
export const deleteObjectRequestSchema = z.strictObject({ bucket: bucketNameSchema, key: objectKeySchema });

/** `prefix` of a listing: 0 to 1024 characters, like a key's beginning (empty: every key). */
export const listPrefixSchema = z
  .string()
  .refine((k) => !hasLoneSurrogate(k), 'must be valid Unicode (no lone surrogate)')
  .refine((k) => codePoints(k) <= 1024, 'must be at most 1024 characters');

/** `delimiter` of a listing: 1 to 1024 characters (S3's `delimiter`, usually `/`). */
export const listDelimiterSchema = z
  .string()
  .min(1, 'must be 1 to 1024 characters (leave it out to list without one)')
  .refine((k) => !hasLoneSurrogate(k), 'must be valid Unicode (no lone surrogate)')
  .refine((k) => codePoints(k) <= 1024, 'must be at most 1024 characters');

/** Query of `GET …/storage/objects`: a page of one bucket, optionally under a prefix and rolled up at a delimiter. */
export const listObjectsQuerySchema = pageQuerySchema.extend({
  bucket: bucketNameSchema,
  prefix: listPrefixSchema.optional(),
  delimiter: listDelimiterSchema.optional(),
});

/** `true` or `false` as query text. */
const queryFlagSchema = z
  .string()
  .refine((v) => v === 'true' || v === 'false', 'must be true or false')
  .transform((v) => v === 'true');

/** Query of `DELETE …/storage/buckets/{bucket}`: `force=true` deletes its objects first. */
export const deleteBucketQuerySchema = z.strictObject({ force: queryFlagSchema.optional() });

/**
 * Query of a GET or HEAD of object bytes: nothing, or a signed URL's `expires` and `signature`
 * (docs/storage.md "Signed URLs"; judged as a credential, not here).
 */
export const objectReadQuerySchema = z.strictObject({ expires: z.string().optional(), signature: z.string().optional() });

/** The content type of bytes whose writer named none. */
export const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

function hasLoneSurrogate(s: string): boolean {
  return /[\uD800-\uDFFF]/u.test(s);
}

function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

// Answers

/** A bucket record (the interface contract "Bucket record"). */
export const bucketSchema = z.object({ project: z.string().regex(ID_PATTERNS.prj), name: bucketNameSchema, created_at: timestampSchema });

/** Answer of `GET …/storage/buckets`. */
export const bucketListSchema = pageAnswerSchema('buckets', bucketSchema);

/** An object catalog row (the interface contract "Object catalog row"). */
export const objectRowSchema = z.object({
  id: z.string().regex(ID_PATTERNS.obj),
  project: z.string().regex(ID_PATTERNS.prj),
  bucket: bucketNameSchema,
  key: z.string().min(1),
  size: z.int().min(0),
  etag: z.string(),
  content_type: z.string(),
  backend: z.enum(['fs', 's3']),
  state: z.enum(['pending', 'stored']),
  created_at: timestampSchema,
  updated_at: timestampSchema,
});

/**
 * Answer of `GET …/storage/objects?bucket=`: a page of one bucket's rows, by key, and with a
 * `delimiter` the common prefixes the page covers (S3's CommonPrefixes; always present, empty without one).
 */
export const objectListSchema = pageAnswerSchema('objects', objectRowSchema).extend({ bucket: bucketNameSchema, common_prefixes: z.array(z.string()) });

/** Answer of `POST …/storage/uploads` (the interface contract: upload ticket). */
export const uploadTicketSchema = z.object({
  object_id: z.string().regex(ID_PATTERNS.obj),
  method: z.literal('PUT'),
  upload_url: z.string(),
  headers: stringMapSchema,
  max_bytes: z.int(),
  expires_at: timestampSchema,
});

/** Answer of `POST …/storage/downloads` (the interface contract: download ticket). */
export const downloadTicketSchema = z.object({
  method: z.literal('GET'),
  download_url: z.string(),
  headers: stringMapSchema,
  expires_at: timestampSchema,
  object: objectRowSchema,
  /** With `signed: true`: the path with `expires` and `signature`, usable without a session until `expires_at`. */
  signed_url: z.string().optional(),
});
