/**
 * Pieces every answer schema shares: timestamps (the interface contract: "All timestamps are RFC 3339
 * in UTC") and the error envelope (the contract's "Errors"; statuses in shared/errors.ts). The
 * answer schemas describe what the service sends; the OpenAPI document is generated from them
 * (docs/api.md "How the reference is made").
 */
import { z } from 'zod';
import { ERROR_STATUS, STATUS_VARIANTS, type ErrorCode } from '../errors.ts';

/** An RFC 3339 timestamp in UTC, as every answer writes it (`2026-05-01T12:00:00.000Z`). */
export const timestampSchema = z.iso.datetime();

/** A string map (ticket headers). */
export const stringMapSchema = z.record(z.string(), z.string());

/** The error envelope whose `code` is one of `codes` (every code of the contract by default). */
export function errorEnvelopeSchema(codes: readonly ErrorCode[] = Object.keys(ERROR_STATUS) as ErrorCode[]) {
  return z.object({
    error: z.object({
      code: z.enum(codes as [ErrorCode, ...ErrorCode[]]),
      message: z.string(),
    }),
  });
}

/** The codes answered with `status` (shared/errors.ts, with its documented status variants). */
export function codesOfStatus(status: number): ErrorCode[] {
  const codes = new Set((Object.keys(ERROR_STATUS) as ErrorCode[]).filter((code) => ERROR_STATUS[code] === status));
  for (const variant of Object.values(STATUS_VARIANTS)) if (variant.status === status) codes.add(variant.code);
  return [...codes];
}
