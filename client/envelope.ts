/**
 * The product envelope of the engine's `/v2` answers, decoded in this one place for the SDK, the CLI
 * and every test suite (the interface contract "What the service does"; docs/engine.md "HTTP
 * surface"): 8 bytes `SVCRSP01`, a 4-byte big-endian length N, N bytes of UTF-8 JSON, nothing after.
 * It follows the contract, not the engine's encoder, so a drift between them shows.
 */

/** The envelope's magic. */
export const ENVELOPE_MAGIC = 'SVCRSP01';
/** The content type the engine answers with. */
export const PRODUCT_CONTENT_TYPE = 'application/vnd.svc.product-v1';

const HEADER_BYTES = 12;

/** A body that is not a well-formed product envelope. */
export class EnvelopeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EnvelopeError';
  }
}

/** Decodes a product envelope into its JSON value; throws `EnvelopeError` when any part is off. */
export function decodeEnvelope(raw: Uint8Array): unknown {
  if (raw.byteLength < HEADER_BYTES) throw new EnvelopeError(`envelope shorter than its header: ${raw.byteLength} bytes`);
  let magic = '';
  for (let i = 0; i < 8; i++) magic += String.fromCharCode(raw[i]!);
  if (magic !== ENVELOPE_MAGIC) {
    const start = new TextDecoder().decode(raw.subarray(0, 40));
    throw new EnvelopeError(`bad envelope magic ${JSON.stringify(magic)}: ${start}`);
  }
  const length = new DataView(raw.buffer, raw.byteOffset, raw.byteLength).getUint32(8, false);
  if (raw.byteLength !== HEADER_BYTES + length) {
    throw new EnvelopeError(`envelope says ${length} bytes, carries ${raw.byteLength - HEADER_BYTES}`);
  }
  const text = new TextDecoder('utf-8', { fatal: true }).decode(raw.subarray(HEADER_BYTES));
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new EnvelopeError('envelope body is not JSON');
  }
}

/** Encodes `value` as a product envelope (for tests and tools that stand in for an engine). */
export function encodeEnvelope(value: unknown): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(value));
  const out = new Uint8Array(HEADER_BYTES + json.byteLength);
  for (let i = 0; i < 8; i++) out[i] = ENVELOPE_MAGIC.charCodeAt(i);
  new DataView(out.buffer).setUint32(8, json.byteLength, false);
  out.set(json, HEADER_BYTES);
  return out;
}

/** True when a `Content-Type` header names the product envelope. */
export function isProductType(contentType: string | null): boolean {
  return contentType !== null && contentType.split(';')[0]!.trim().toLowerCase() === PRODUCT_CONTENT_TYPE;
}
