/**
 * Opaque list cursors (DESIGN §3: `limit`, `cursor`, `next_cursor`). A cursor is the DynamoDB
 * LastEvaluatedKey, base64url-encoded; it is checked against the partition being listed so a forged
 * cursor can never reach another partition.
 */
import { errors } from '../errors.ts';

type KeyMap = Record<string, unknown>;

function toBase64Url(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function fromBase64Url(text: string): string {
  const bin = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
}

/** Encodes a LastEvaluatedKey as a cursor, or null at the end of the list. */
export function encodeCursor(key: KeyMap | undefined): string | null {
  return key ? toBase64Url(JSON.stringify(key)) : null;
}

/**
 * Decodes a cursor; `partition` names the attribute and value the key must carry. A cursor that does
 * not decode, or names another partition, is 400.
 */
export function decodeCursor(cursor: string | undefined, partition: [string, string]): KeyMap | undefined {
  if (cursor === undefined) return undefined;
  let key: unknown;
  try {
    key = JSON.parse(fromBase64Url(cursor));
  } catch {
    throw errors.invalid('cursor is not a cursor this service issued');
  }
  if (
    typeof key !== 'object' || key === null || Array.isArray(key) ||
    (key as KeyMap)[partition[0]] !== partition[1] ||
    !Object.values(key as KeyMap).every((v) => typeof v === 'string')
  ) {
    throw errors.invalid('cursor is not a cursor this service issued');
  }
  return key as KeyMap;
}

/** A page of a list. */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}
