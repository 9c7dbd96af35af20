/**
 * The product envelope every `/v2` body travels in (docs/engine.md "HTTP surface"; the interface contract, docs/interface.md): 8 ASCII bytes `SVCRSP01`, a
 * big-endian u32 length N, then N bytes of UTF-8 JSON.
 */
export const ENVELOPE_MAGIC = 'SVCRSP01';
export const ENVELOPE_CONTENT_TYPE = 'application/vnd.svc.product-v1';
const HEADER_BYTES = 12;

/** Wraps a JSON text in the envelope. */
export function encodeEnvelope(json: string): Buffer {
  const length = Buffer.byteLength(json, 'utf8');
  const out = Buffer.allocUnsafe(HEADER_BYTES + length);
  out.write(ENVELOPE_MAGIC, 0, 'latin1');
  out.writeUInt32BE(length, 8);
  out.write(json, HEADER_BYTES, 'utf8');
  return out;
}
