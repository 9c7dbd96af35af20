/** Headers of the internal byte routes (host-agent/routes/blobs.ts, host-agent/routes/functions.ts): the one reading of an integer header. */
import { errors } from '../../shared/errors.ts';

/** The non-negative integer in header `name`, or null when absent; 400 `invalid_request` when malformed. */
export function intHeader(headers: Headers, name: string): number | null {
  const raw = headers.get(name);
  if (raw === null) return null;
  if (!/^\d{1,15}$/.test(raw)) throw errors.invalid(`${name}: must be a non-negative integer`);
  return Number(raw);
}

/** `intHeader` of a header the route cannot do without: 400 `invalid_request` when absent. */
export function requiredIntHeader(headers: Headers, name: string): number {
  const value = intHeader(headers, name);
  if (value === null) throw errors.invalid(`${name}: is required`);
  return value;
}
