/** Timestamps: RFC 3339 in UTC, as the contract requires of every timestamp. */

/** The current time as RFC 3339 UTC with milliseconds, e.g. `2026-11-22T00:21:13.000Z`. */
export function nowIso(now: number = Date.now()): string {
  return new Date(now).toISOString();
}
