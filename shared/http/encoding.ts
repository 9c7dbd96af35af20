/**
 * Which answers are worth compressing (docs/api.md "Decisions": compression). An edge that compresses
 * answers of a compressible type for clients that accept gzip or br — Cloudflare's, and miniflare's
 * entry worker, which plays it in the local stack — leaves alone an answer that already names a
 * `Content-Encoding` other than those, so a small answer is sent as `identity`, the coding that
 * changes nothing (RFC 9110 §8.4.1): under 1 KiB, gzip saves a few hundred bytes at most on loopback
 * or a LAN and costs both ends more than it saves (the client's decoding was ~1 ms of a 4 ms `GET
 * /v0/health` with `fetch`), and the answer keeps its `Content-Length`. Larger answers (listings, the
 * OpenAPI document) are still compressed for a client that asks. The service's Node listeners drop
 * the marker on the way out (`isIdentityCoding`), since it tells a client nothing.
 */

/** Answers of fewer bytes than this are sent uncompressed (Traefik's default minimum; Caddy's is 512). */
export const COMPRESS_MIN_BYTES = 1024;

/** The header that keeps an edge from compressing a body of `bytes` bytes, when it is too small to be worth it. */
export function smallAnswerEncoding(bytes: number): Record<string, string> {
  return bytes < COMPRESS_MIN_BYTES ? { 'content-encoding': 'identity' } : {};
}

/** True for the `Content-Encoding` header `identity`: the body is as it is, nothing to tell a client. */
export function isIdentityCoding(name: string, value: string | readonly string[] | undefined): boolean {
  return name.toLowerCase() === 'content-encoding' && typeof value === 'string' && value.trim().toLowerCase() === 'identity';
}
