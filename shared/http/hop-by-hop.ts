/**
 * The one hop-by-hop header filter (RFC 9110 §7.6.1): headers that describe one connection, never
 * the message, are not passed on by anything that relays a message (the `/v2` listener, the
 * forwarder, the local front).
 */

/** Headers that describe one connection, never the message (RFC 9110 §7.6.1, plus legacy ones). */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** The lowercase names a `Connection` header lists (hop-by-hop too), or null when there is none. */
export function connectionTokens(value: string | readonly string[] | undefined): Set<string> | null {
  if (value === undefined) return null;
  const out = new Set<string>();
  for (const v of typeof value === 'string' ? [value] : value) {
    for (const t of v.split(',')) {
      const name = t.trim().toLowerCase();
      if (name) out.add(name);
    }
  }
  return out;
}

/** True when the lowercase header `name` must not be relayed, given the names `Connection` listed. */
export function isHopByHop(name: string, listed: ReadonlySet<string> | null): boolean {
  return HOP_BY_HOP.has(name) || (listed !== null && listed.has(name));
}
